"""The ``ontology/<name>/ingest/`` drop box: copy a file in to ingest it.

A file is buffered in memory while it is written (a bytearray: appends are amortised,
no quadratic copying) and uploaded ``delay`` seconds after its last close, so that an
immediate ``rm`` cancels it and an immediate ``mv`` to another ontology's ``ingest/``
uploads it there. Editors' temporary names are never uploaded. While the server works on
it, ``<name>.ingesting`` shows the job; it disappears when the job completes (a failed
job stays, showing its error, and a completed one with warnings, such as a section
nearly identical to an existing concept, stays showing them, until removed). A file
stays in ``ingest/`` until the server accepted it: while the server is unreachable, or
its ingest queue is full (429), the upload is retried, and the ``.ingesting`` file says
why it waits.

All or nothing: a file whose writing failed (over the cap, out of space, any error) is
never uploaded; it stays, marked failed in its ``.ingesting`` file, until it is removed
or rewritten from empty. A file removed, or renamed to a temporary name, before its
upload is never uploaded either. The cap is the server's (``kg_fuse.limits``).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.errors import RETRIED
from kg_fuse.fs.kernel.errnos import Busy, Empty, Invalid, NoEntry, NoSpace, TooLarge
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.facade import QueryService
from kg_fuse.limits import MAX_INGEST_BYTES
from kg_fuse.retry import SERVER_RETRY, Backoff

log = logging.getLogger(__name__)

MAX_FILE_BYTES = MAX_INGEST_BYTES  # larger files fail with EFBIG; the server's cap too
MAX_PENDING_BYTES = 8 * MAX_INGEST_BYTES  # all files waiting in memory: ENOSPC past it
JOB_SUFFIX = ".ingesting"
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")  # the platform's
DUPLICATE = "duplicate"  # a job status of ours: the upload added nothing
_TEMPORARY = re.compile(r"^\.|~$|\.sw[a-p]$|\.tmp$|^#.*#$|^4913$|\.part$|\.crdownload$")


# Failures after which the file stays and its upload is tried again (the retry
# policy's), with what its ``.ingesting`` file says meanwhile (the server's reason
# follows, as its error).
WAITING_FOR: dict[type[errors.KgError], str] = {
    errors.TooManyRequests: "waiting for room in the server's ingest queue",
    **{kind: "waiting for the server" for kind in RETRIED},
}


def _waiting(exc: errors.KgError) -> str:
    return next(status for kind, status in WAITING_FOR.items() if isinstance(exc, kind))


def is_temporary(name: str) -> bool:
    """Names editors and downloaders use for files that are not the final content."""
    return bool(_TEMPORARY.search(name))


@dataclass
class PendingFile:
    data: bytearray = field(default_factory=bytearray)
    open_handles: int = 0
    upload_at: float | None = None
    failed: str | None = None  # why a write failed: this content is never uploaded
    mtime_ns: int = field(default_factory=time.time_ns)  # the last write, as ls -l shows it
    retries: Backoff = field(default_factory=Backoff)


@dataclass
class Job:
    ontology: str
    file_name: str
    job_id: str | None = None
    status: str = "uploading"
    progress: str = ""
    error: str | None = None
    mtime_ns: int = field(default_factory=time.time_ns)
    warnings: tuple[str, ...] = ()

    def render(self) -> bytes:
        lines = [f"file: {self.file_name}", f"ontology: {self.ontology}",
                 f"job: {self.job_id or '-'}", f"status: {self.status}"]
        if self.progress:
            lines.append(f"progress: {self.progress}")
        if self.error:
            lines.append(f"error: {self.error}")
        lines += [f"warning: {w}" for w in self.warnings]
        return ("\n".join(lines) + "\n").encode("utf-8", errors="replace")


Key = tuple[str, str]  # (ontology, file name)


class IngestBox:
    """The ``ingest/`` drop boxes' files and their uploads: a service beside the saved
    queries. The tree's ingest kinds write through it; ``run``, a task of the mount,
    uploads and follows the jobs, and tells the query service when a document is in."""

    def __init__(self, client: KgApiClient, service: QueryService, catalog: Catalog,
                 delay: float = 2.0) -> None:
        """``service``: told when a document is in (the listings go stale);
        ``catalog``: the server's name of an ontology directory."""
        self._client = client
        self._service = service
        self._catalog = catalog
        self.delay = delay
        self.files: dict[Key, PendingFile] = {}
        self.jobs: dict[Key, Job] = {}
        self._wake = trio.Event()
        self._job_polls = Backoff()  # while the server fails, job polls back off too

    # -- the files ----------------------------------------------------------------------

    def names(self, ontology: str) -> list[str]:
        files = [n for (o, n) in self.files if o == ontology]
        jobs = [n + JOB_SUFFIX for (o, n) in self.jobs if o == ontology]
        return sorted(files + jobs)

    def get(self, ontology: str, name: str) -> PendingFile | None:
        return self.files.get((ontology, name))

    def job(self, ontology: str, job_file_name: str) -> Job | None:
        if not job_file_name.endswith(JOB_SUFFIX):
            return None
        return self.jobs.get((ontology, job_file_name[: -len(JOB_SUFFIX)]))

    def create(self, ontology: str, name: str) -> PendingFile:
        if name.endswith(JOB_SUFFIX):
            raise Invalid(f"{JOB_SUFFIX} names are the jobs' own: {name!r}")
        pending = self.files.setdefault((ontology, name), PendingFile())
        pending.upload_at = None
        return pending

    def _fail(self, pending: PendingFile, error: TooLarge | NoSpace) -> TooLarge | NoSpace:
        """The content is spoiled: it is never uploaded (see the module's docstring)."""
        pending.failed = str(error)
        pending.upload_at = None
        return error

    def write(self, pending: PendingFile, offset: int, data: bytes) -> None:
        end = offset + len(data)
        if end > MAX_FILE_BYTES:
            raise self._fail(pending, TooLarge(f"file too large (over {MAX_FILE_BYTES} bytes)"))
        if end - len(pending.data) > MAX_PENDING_BYTES - self.pending_bytes():
            raise self._fail(pending, NoSpace("no space left for files waiting to be uploaded"))
        buffer = pending.data
        if offset == len(buffer):
            buffer.extend(data)
        else:
            if offset > len(buffer):
                buffer.extend(bytes(offset - len(buffer)))
            buffer[offset:end] = data
        pending.upload_at = None
        pending.mtime_ns = time.time_ns()

    def pending_bytes(self) -> int:
        return sum(len(p.data) for p in self.files.values())

    def truncate(self, pending: PendingFile, size: int) -> None:
        if size > MAX_FILE_BYTES:
            raise self._fail(pending, TooLarge(f"file too large (over {MAX_FILE_BYTES} bytes)"))
        if size == 0:
            pending.failed = None  # rewritten from empty: a fresh start
        del pending.data[size:]
        pending.data.extend(bytes(size - len(pending.data)))
        pending.mtime_ns = time.time_ns()

    def opened(self, pending: PendingFile) -> None:
        pending.open_handles += 1
        pending.upload_at = None

    @staticmethod
    def empty_at_close(pending: PendingFile, name: str) -> bool:
        """Whether closing the last open of ``pending`` would leave an empty file to
        upload: refused instead (``touch``, ``cp`` of an empty file), as the server
        would refuse it."""
        return (not pending.data and pending.failed is None and pending.open_handles <= 1
                and not is_temporary(name))

    def refuse_empty(self, ontology: str, name: str) -> Empty:
        """An empty file closed: it goes, never uploaded; the error says why."""
        self.files.pop((ontology, name), None)
        log.info("%r in %r is empty: not uploaded", name, ontology)
        return Empty(f"{name!r} is empty: nothing to ingest, not uploaded")

    def closed(self, ontology: str, name: str, pending: PendingFile) -> None:
        if self.empty_at_close(pending, name):  # its opener could not be asked at flush
            self.refuse_empty(ontology, name)
            return
        pending.open_handles = max(0, pending.open_handles - 1)
        if pending.failed is not None:
            log.warning("not uploading %r into %r: %s", name, ontology, pending.failed)
            self.jobs[(ontology, name)] = Job(ontology, name, status="failed",
                                              error=f"not uploaded: {pending.failed}")
            return
        if pending.open_handles == 0 and not is_temporary(name):
            pending.upload_at = trio.current_time() + self.delay
            self._wake.set()

    def remove(self, ontology: str, name: str) -> None:
        """``rm``: a pending file is cancelled; a finished job's file is dismissed."""
        if self.files.pop((ontology, name), None) is not None:
            log.info("ingest of %r into %r cancelled", name, ontology)
            job = self.jobs.get((ontology, name))
            if job is not None and job.job_id is None:  # never reached the server
                del self.jobs[(ontology, name)]
            return
        job = self.job(ontology, name)
        if job is None:
            raise NoEntry(name)
        if job.status not in ("failed", "cancelled", "completed", DUPLICATE):
            raise Busy(f"job {job.job_id} of {name!r} is still {job.status}")
        del self.jobs[(ontology, job.file_name)]

    def move(self, src: Key, dst: Key) -> None:
        pending = self.files.get(src)
        if pending is None:
            raise NoEntry(src[1])
        if not pending.open_handles and self.empty_at_close(pending, dst[1]):
            raise Empty(f"{src[1]!r} is empty: nothing to ingest as {dst[1]!r}")
        del self.files[src]
        self.files[dst] = pending
        job = self.jobs.get(src)
        if job is not None and job.job_id is None:  # its failure travels with it
            del self.jobs[src]
            self.jobs[dst] = Job(dst[0], dst[1], status=job.status, error=job.error)
        pending.upload_at = None  # renamed to a temporary name: never uploaded
        if pending.failed is None and pending.open_handles == 0 and not is_temporary(dst[1]):
            pending.upload_at = trio.current_time() + self.delay
            self._wake.set()

    # -- the uploads ----------------------------------------------------------------------

    async def run(self) -> None:
        """Upload due files and follow their jobs, until cancelled: it sleeps until the
        next upload is due or the next job poll (every ``SERVER_RETRY.initial`` seconds
        while the server answers, under the retry policy while it fails), or a file is
        closed."""
        while True:
            now = trio.current_time()
            for key, pending in list(self.files.items()):
                if pending.failed is None and pending.upload_at is not None \
                        and pending.upload_at <= now:
                    pending.upload_at = None
                    if not pending.data:  # emptied since its close (``truncate -s 0``)
                        self.refuse_empty(*key)
                        continue
                    await self._upload(key, pending)
            for job in self._running():
                if self._job_polls.waiting or not await self._follow(job):
                    break  # the server fails: one request per attempt, not one per job
            self._wake = trio.Event()
            with trio.move_on_at(self._next_due()):
                await self._wake.wait()

    def _running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.job_id is not None
                and job.status not in ("failed", "cancelled", DUPLICATE, "completed")]

    def _next_due(self) -> float:
        """When ``run`` has something to do next, without being woken (trio clock)."""
        due = [p.upload_at for p in self.files.values()
               if p.failed is None and p.upload_at is not None]
        if self._running():
            due.append(max(trio.current_time() + SERVER_RETRY.initial,
                           self._job_polls.not_before))
        return min(due, default=float("inf"))

    async def _upload(self, key: Key, pending: PendingFile) -> None:
        """Upload one file. It leaves ``ingest/`` only once the server accepted it: if
        the server cannot be reached it stays, and the upload is retried."""
        ontology, name = key
        job = self.jobs[key] = Job(ontology, name)
        try:
            receipt = await self._client.ingest(
                self._catalog.server_name(ontology), name, bytes(pending.data),
                image=name.lower().endswith(IMAGE_EXTENSIONS))
        except RETRIED as exc:
            delay = pending.retries.failed()
            log.warning("upload of %r into %r failed, retrying in %.1fs: %s", name, ontology,
                        delay, exc)
            job.status, job.error = _waiting(exc), str(exc)
            if self.files.get(key) is pending and pending.upload_at is None:
                pending.upload_at = trio.current_time() + delay
            return
        except errors.KgError as exc:
            log.warning("upload of %r into %r refused: %s", name, ontology, exc)
            job.status, job.error = "failed", str(exc)  # the file stays, for the user
            return
        if self.files.get(key) is pending:
            del self.files[key]
        if receipt.job_id is None:  # the ontology already holds this content: say so
            job.job_id, job.status = receipt.duplicate_of, DUPLICATE
            job.error = ("this ontology already holds this exact content (job "
                         f"{receipt.duplicate_of}); nothing new was added. rm this file "
                         "to dismiss it")
            log.warning("upload of %r into %r: duplicate of job %s", name, ontology,
                        receipt.duplicate_of)
            return
        job.job_id = receipt.job_id
        job.status = receipt.status or "pending"
        log.info("uploaded %r into %r: job %s", name, ontology, job.job_id)

    async def _follow(self, job: Job) -> bool:
        """Ask the server for the job's status; False if the server failed (the job
        polls back off)."""
        assert job.job_id is not None
        try:
            status = await self._client.job(job.job_id)
        except RETRIED as exc:
            delay = self._job_polls.failed()
            log.info("job %s: %s; asking again in %.1fs", job.job_id, exc, delay)
            return False
        except errors.KgError as exc:
            log.info("job %s: %s", job.job_id, exc)
            return True
        self._job_polls.succeeded()
        job.status = status.status
        if status.progress:
            job.progress = ", ".join(f"{k}={v}" for k, v in sorted(status.progress.items()))
        job.error = status.error
        job.warnings = status.warnings
        if status.status == "completed":
            log.info("job %s completed: %r is in %r", job.job_id, job.file_name, job.ontology)
            for warning in status.warnings:
                log.warning("job %s: %s", job.job_id, warning)
            if not status.warnings:  # with warnings it stays, to be read and removed
                self.jobs.pop((job.ontology, job.file_name), None)
            self._service.server.content_changed()
        elif status.finished:
            log.warning("job %s %s: %s", job.job_id, status.status, status.error)
