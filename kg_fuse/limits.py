"""Sizes both sides agree on: what the client lets a user write is what the server takes."""

from __future__ import annotations

MIB = 1024 * 1024

MAX_INGEST_BYTES = 32 * MIB  # one document copied into ingest/ (POST /ingest `file`)
MAX_IMAGE_BYTES = 10 * MIB  # POST /ingest/image, as on the platform
MIN_IMAGE_BYTES = 100
MAX_BODY_BYTES = 1 * MIB  # any other request body
MULTIPART_OVERHEAD = 64 * 1024  # form fields and boundaries around an uploaded file
MAX_QUERY_CHARS = 10_000  # a search's text (the model reads 256 tokens of it)
MAX_NAME_CHARS = 1_000  # an ontology's name, a catalog filter
DEFAULT_LIMIT = 50  # results a query directory lists when its .meta/limit is unset
MAX_LIMIT = 1000  # the most a query directory's .meta/limit may ask for
LOG_PREFIX_CHARS = 200  # of any client-supplied value written to a log

# The ingest queue: waiting and running jobs hold their text in memory. Past a limit an
# upload is answered 429; the mount keeps the file and tries again.
MAX_QUEUED_JOBS_PER_CLIENT = 16
MAX_QUEUED_JOBS = 32
MAX_QUEUED_BYTES_PER_CLIENT = 2 * MAX_INGEST_BYTES  # 64 MiB
MAX_QUEUED_BYTES = 3 * MAX_INGEST_BYTES  # 96 MiB
MAX_SECTIONS_PER_DOCUMENT = 2_000  # heading sections (concepts) of one ingested document


def shown(value: object, limit: int = LOG_PREFIX_CHARS) -> str:
    """``repr`` of a client-supplied value, cut to a short prefix for logs and messages."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"
