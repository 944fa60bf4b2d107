"""Errors of the API client: one hierarchy, so callers handle every failure with a single
``except KgError``; the filesystem's errno for each lives in ``kg_fuse.fs.kernel.errnos``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class KgError(Exception):
    """Any failure talking to the knowledge-graph API.

    ``method`` and ``path`` name the call that failed, ``status`` the HTTP status it got
    (None when no answer came: a refused connection, a timeout)."""

    def __init__(self, message: str, *, method: str | None = None, path: str | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.path = path
        self.status = status


class ServerUnreachable(KgError):
    """Connection refused, reset or DNS failure: the server is down or not there."""


class ServerTimeout(KgError):
    """The server did not answer within the call's deadline."""


class ServerFault(KgError):
    """A 5xx answer, or a body that is not the JSON shape the contract promises."""


class AuthenticationFailed(KgError):
    """Credentials rejected (401), even after fetching a fresh token."""


class PermissionDenied(KgError):
    """The client is authenticated but lacks the permission (403)."""


class NotFound(KgError):
    """The server has no such object (404)."""


class Conflict(KgError):
    """The object already exists (409)."""


class InvalidRequest(KgError):
    """The server rejected our request as invalid (400/422)."""


class TooManyRequests(ServerFault):
    """The server has no room for this now (429: its ingest queue is full, or too many
    failed sign-ins); its detail says which and for how long. The same request may
    succeed later: retried wherever a server fault is (an upload from ``ingest/``)."""


class MissingCredentials(KgError):
    """No client credentials were found anywhere we look."""


# Failures that say the server is down or failing: the same call may succeed later, so
# it is retried under the one policy (:mod:`kg_fuse.retry`); other errors are the
# server's answer.
RETRIED: tuple[type[KgError], ...] = (ServerUnreachable, ServerTimeout, ServerFault)


@contextlib.contextmanager
def one_failure() -> Iterator[None]:
    """Calls made in parallel (a trio nursery around API calls) fail as one call would:
    with the first :class:`KgError`, not the ``ExceptionGroup`` trio wraps it in, which
    no ``except KgError`` catches and no errno maps (``ls`` answered EIO for a timeout)."""
    try:
        yield
    except* KgError as group:
        first: BaseException = group
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None
