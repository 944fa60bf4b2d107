"""Background ingestion jobs.

A job is recorded as ``pending`` with null progress and queued; one worker, started by
the app's lifespan in an anyio task group (:meth:`JobRunner.running`), runs the queue in
order: the parse, the store writes and the embedding all happen in a worker thread, so
the event loop keeps answering (including ``GET /jobs/{id}`` polls). Shutting down
cancels the worker: a job in progress stops at its next stage, within a step of its
embedding (failed, saying why, its document taken out again), and queued ones stay
pending, to be marked failed at the next start (:meth:`JobRunner.settle_interrupted`,
also for a process that was killed).

The queue is bounded (:class:`IngestLimits`): waiting and running jobs hold their text in
memory, so past a number of jobs or bytes, per client or in all, an upload is refused
(:class:`QueueFull`, a 429). A document of more sections than the limit fails at its parse.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from kg_fuse.limits import (
    MAX_QUEUED_BYTES,
    MAX_QUEUED_BYTES_PER_CLIENT,
    MAX_QUEUED_JOBS,
    MAX_QUEUED_JOBS_PER_CLIENT,
    MAX_SECTIONS_PER_DOCUMENT,
    MIB,
)
from kg_fuse.memory import give_memory_back
from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.knowledge import duplicates
from kg_fuse.server.knowledge.changes import ContentChanges
from kg_fuse.server.storage import job_rows, reads
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)

INTERRUPTED = "the server stopped before the job finished; upload the file again"


class JobFailed(RuntimeError):
    """The job ends failed for a reason the user can act on, recorded as it is said."""


class JobInterrupted(JobFailed):
    """The server is shutting down: the job stops between stages."""


class QueueFull(Exception):
    """No room for another job; the message says which limit, to the user."""


class ShuttingDown(Exception):
    """No worker runs to take a new job (the server is stopping)."""


@dataclass(frozen=True)
class IngestLimits:
    """The most jobs (waiting or running) and bytes of their text, per client and in all,
    and the most heading sections one document may have."""

    jobs_per_client: int = MAX_QUEUED_JOBS_PER_CLIENT
    jobs: int = MAX_QUEUED_JOBS
    bytes_per_client: int = MAX_QUEUED_BYTES_PER_CLIENT
    bytes: int = MAX_QUEUED_BYTES
    sections: int = MAX_SECTIONS_PER_DOCUMENT


@dataclass(frozen=True)
class UploadedDocument:
    """A text document uploaded to be ingested."""

    text: str
    filename: str
    ontology: str
    client_id: str
    size: int  # bytes, as uploaded
    digest: str  # its content hash


@dataclass(frozen=True)
class QueuedJob:
    job_id: str
    text: str
    filename: str
    ontology: str
    client_id: str
    size: int  # bytes, as uploaded


@dataclass(frozen=True)
class Duplicate:
    """An upload its ontology holds already, or a job still working on it."""

    existing_job_id: str | None
    status: str  # that job's status ("completed" with no job: the document is listed)
    where: str  # in the ontology, or by a running job for it


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"


class JobRunner:
    """Creates job rows and runs them sequentially in the background."""

    def __init__(self, changes: ContentChanges, store: Store,
                 limits: IngestLimits | None = None) -> None:
        self.changes = changes  # what a job changes: content, index, calibration
        self.store = store  # the job rows
        self.limits = limits or IngestLimits()
        self._queue: MemoryObjectSendStream[QueuedJob] | None = None
        self._stopping = threading.Event()
        self._held: dict[str, list[int]] = {}  # client -> sizes of its jobs not done

    @property
    def accepting(self) -> bool:
        """Whether a worker runs (inside the app's lifespan) to take new jobs."""
        return self._queue is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run queued jobs, one at a time, while the block runs (the app's lifespan)."""
        send, receive = anyio.create_memory_object_stream[QueuedJob](math.inf)
        self._stopping.clear()
        self._held.clear()
        async with anyio.create_task_group() as group:
            group.start_soon(self._worker, receive)
            self._queue = send
            try:
                yield
            finally:
                self._queue = None
                self._stopping.set()  # the job in progress stops at its next stage
                group.cancel_scope.cancel()
                send.close()

    async def _worker(self, receive: MemoryObjectReceiveStream[QueuedJob]) -> None:
        async with receive:
            async for job in receive:
                try:
                    await self._run(job)
                finally:
                    self.release(job.client_id, job.size)

    def admit(self, client_id: str, size: int) -> None:
        """Hold room for one more job of ``size`` bytes, or raise :class:`QueueFull`.
        Call on the event loop (checking and holding is then one step); :meth:`release`
        gives it back."""
        mine = self._held.get(client_id, [])
        every = [n for sizes in self._held.values() for n in sizes]
        limits = self.limits
        for over, why in (
            (len(mine) >= limits.jobs_per_client,
             f"you have {len(mine)} jobs waiting or running (at most "
             f"{limits.jobs_per_client} per client)"),
            (sum(mine) + size > limits.bytes_per_client,
             f"your jobs waiting or running hold {_mib(sum(mine))} and this file "
             f"{_mib(size)} (at most {_mib(limits.bytes_per_client)} per client)"),
            (len(every) >= limits.jobs,
             f"the server has {len(every)} jobs waiting or running (at most {limits.jobs})"),
            (sum(every) + size > limits.bytes,
             f"the jobs waiting or running hold {_mib(sum(every))} and this file "
             f"{_mib(size)} (at most {_mib(limits.bytes)} in all)"),
        ):
            if over:
                raise QueueFull(f"The ingest queue is full: {why}; retry once earlier "
                                "jobs have finished")
        self._held[client_id] = [*mine, size]

    def release(self, client_id: str, size: int) -> None:
        mine = self._held.get(client_id, [])
        if size in mine:
            mine.remove(size)
        if not mine:
            self._held.pop(client_id, None)

    def settle_interrupted(self) -> None:
        """Jobs a previous process left unfinished cannot resume. One that had listed
        its document before the process died lost only its report: it is completed. The
        rest are failed, to be uploaded again; what they had stored unlisted was taken
        out at start (:func:`writes.delete_unpublished`), so that upload is no duplicate."""
        unfinished = job_rows.unfinished(self.store)
        now, completed = time.time(), 0
        for job in unfinished:
            document = None if job["started_at"] is None else job_rows.listed_document(
                self.store, job["ontology"], job["content_hash"], job["started_at"])
            if document is None:
                self._update(job["id"], status="failed", error=INTERRUPTED,
                             completed_at=now)
                continue
            completed += 1
            self._update(job["id"], status="completed", completed_at=now,
                         result={"document_id": document, "completed_before_the_stop": True},
                         progress={"stage": "completed", "percent": 100})
        if unfinished:
            log.warning("of %d jobs a stopped server left unfinished, %d had listed their "
                        "document (completed); the rest are failed", len(unfinished),
                        completed)

    def existing_job(self, digest: str, ontology: str) -> dict | None:
        """The newest job for this content into this ontology (duplicates are per
        ontology, as on the platform)."""
        return job_rows.newest(self.store, digest, ontology)

    def duplicate_of(self, upload: UploadedDocument) -> Duplicate | None:
        """The upload's duplicate: its ontology holds the text, or a job for it is
        pending or running (blocking: it reads the store)."""
        stored = reads.document_in_ontology(self.store, upload.text, upload.ontology)
        previous = self.existing_job(upload.digest, upload.ontology)
        active = previous is not None and previous["status"] in ("pending", "running")
        if stored is None and not active:
            return None
        where = (f"in ontology '{upload.ontology}'" if stored is not None
                 else f"by a running job for ontology '{upload.ontology}'")
        return Duplicate(existing_job_id=previous["id"] if previous else None,
                         status=previous["status"] if previous else "completed",
                         where=where)

    async def submit(self, upload: UploadedDocument) -> str:
        """Record the upload's job and queue it; returns its id. Raises
        :class:`ShuttingDown` when no worker runs, :class:`QueueFull` when there is no
        room (call on the event loop: the room is checked and held in one step)."""
        if not self.accepting:
            raise ShuttingDown("The server is shutting down; retry the upload later")
        self.admit(upload.client_id, upload.size)
        try:
            job_id = await anyio.to_thread.run_sync(
                self.insert, upload.digest, upload.filename, upload.ontology,
                upload.client_id)
            self.start(QueuedJob(job_id, upload.text, upload.filename, upload.ontology,
                                 upload.client_id, upload.size))
        except BaseException:
            self.release(upload.client_id, upload.size)
            raise
        return job_id

    def insert(self, digest: str, filename: str, ontology: str, client_id: str) -> str:
        """Record a pending job (blocking); :meth:`start` then runs it."""
        job_id = f"job_{secrets.token_hex(6)}"
        job_rows.insert(self.store, job_id, digest, filename, ontology, client_id)
        return job_id

    def start(self, job: QueuedJob) -> None:
        """Queue the job for the worker (see :attr:`accepting`), its room held by
        :meth:`admit`."""
        if self._queue is None:
            raise RuntimeError("no job worker runs: the app's lifespan has not started")
        self._queue.send_nowait(job)

    def _update(self, job_id: str, **fields: object) -> None:
        job_rows.update(self.store, job_id, **fields)

    async def _run(self, job: QueuedJob) -> None:
        try:
            await anyio.to_thread.run_sync(self._work, job)
        except Exception as exc:  # a failed job reports why instead of vanishing
            log.exception("job %s failed", job.job_id)
            error = f"{type(exc).__name__}: {exc}"
            await anyio.to_thread.run_sync(
                lambda: self._update(job.job_id, status="failed", error=error,
                                     completed_at=time.time()))

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise JobInterrupted(INTERRUPTED)

    def _work(self, job: QueuedJob) -> None:
        try:
            self._stages(job)
        except JobFailed as exc:  # recorded here: when stopping, the awaiting task is gone
            log.warning("job %s: %s", job.job_id, exc)
            self._update(job.job_id, status="failed", error=str(exc),
                         completed_at=time.time())
        finally:
            # A job's passing arrays (the model's arena, the index's new matrix, the
            # calibration's scores) grow with the corpus; glibc keeps what they freed, so
            # without this the server's memory rose by ~45 KiB per concept ingested.
            give_memory_back()

    def _stages(self, job: QueuedJob) -> None:
        job_id, text, filename, ontology = job.job_id, job.text, job.filename, job.ontology
        started = time.time()
        self._update(job_id, status="running", started_at=started,
                     progress={"stage": "parsing", "percent": 0})
        doc = parse_text_document(text, filename, ontology, source_type="api")
        self._check_stopping()
        total = len(doc.concepts)
        if total > self.limits.sections:
            raise JobFailed(f"the document has {total} sections, more than the "
                            f"{self.limits.sections} one document may have: split it")
        self._update(job_id, progress={"stage": "embedding", "percent": 30,
                                       "chunks_total": len(doc.chunks),
                                       "concepts_total": total})
        self._check_stopping()
        held = reads.document_in_ontology(self.store, text, ontology)
        if held is not None:  # a forced re-ingest replaces this ontology's copy, no other
            self.changes.remove_document(held)
        outcome = self.changes.add_documents([doc], created_by=job_id,
                                             checkpoint=self._check_stopping)
        embedded = outcome.concepts_created
        result: dict = {"concepts_created": embedded, "chunks": len(doc.chunks),
                        "document_id": reads.document_in_ontology(
                            self.store, text, ontology)}
        if outcome.near_duplicates:
            result["warnings"] = duplicates.warnings(outcome.near_duplicates)
            result["near_duplicates"] = outcome.near_duplicates
        self._update(job_id, status="completed", completed_at=time.time(), result=result,
                     progress={"stage": "completed", "percent": 100,
                               "chunks_total": len(doc.chunks),
                               "chunks_processed": len(doc.chunks),
                               "concepts_total": total})
        log.info("job %s ingested %s into %r: %d concepts in %.1f s", job_id, filename,
                 ontology, embedded, time.time() - started)

    def get(self, job_id: str) -> dict | None:
        return job_rows.get(self.store, job_id)
