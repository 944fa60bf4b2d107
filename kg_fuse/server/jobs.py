"""Background ingestion jobs.

A job is recorded as ``pending`` with null progress and queued; one worker, started by
the app's lifespan in an anyio task group (:meth:`JobRunner.running`), runs the queue in
order: the parse, the store writes and the embedding all happen in a worker thread, so
the event loop keeps answering (including ``GET /jobs/{id}`` polls). Shutting down
cancels the worker: a job in progress stops at its next stage (failed, saying why) and
queued ones stay pending, to be marked failed at the next start.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from kg_fuse.server import repository
from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.duplicates import warning as near_duplicate_warning
from kg_fuse.server.service import KnowledgeGraph

log = logging.getLogger(__name__)

def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


class JobInterrupted(RuntimeError):
    """The server is shutting down: the job stops between stages."""


class JobRunner:
    """Creates job rows and runs them sequentially in the background."""

    def __init__(self, graph: KnowledgeGraph) -> None:
        self.graph = graph
        self._queue: MemoryObjectSendStream[tuple[str, str, str, str]] | None = None
        self._stopping = threading.Event()

    @property
    def accepting(self) -> bool:
        """Whether a worker runs (inside the app's lifespan) to take new jobs."""
        return self._queue is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run queued jobs, one at a time, while the block runs (the app's lifespan)."""
        send, receive = anyio.create_memory_object_stream[tuple[str, str, str, str]](
            math.inf)
        self._stopping.clear()
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

    async def _worker(self, receive: MemoryObjectReceiveStream[tuple[str, str, str, str]]) -> None:
        async with receive:
            async for job in receive:
                await self._run(*job)

    def fail_interrupted(self) -> None:
        """Jobs a previous process left unfinished cannot resume: mark them failed."""
        with self.graph.store.transaction() as conn:
            n = conn.execute(
                "UPDATE jobs SET status = 'failed', error = 'server restarted before the job "
                "finished', completed_at = ? WHERE status NOT IN ('completed', 'failed', "
                "'cancelled')", (time.time(),)).rowcount
        if n:
            log.warning("marked %d interrupted jobs as failed", n)

    def existing_job(self, digest: str, ontology: str) -> dict | None:
        """The newest job for this content into this ontology (duplicates are per
        ontology, as on the platform)."""
        row = self.graph.store.query_one(
            "SELECT id, status FROM jobs WHERE content_hash = ? AND ontology = ? "
            "ORDER BY created_at DESC", (digest, ontology))
        return None if row is None else dict(row)

    def insert(self, digest: str, filename: str, ontology: str, client_id: str) -> str:
        """Record a pending job (blocking); :meth:`start` then runs it."""
        job_id = f"job_{secrets.token_hex(6)}"
        with self.graph.store.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs(id, job_type, status, created_at, ontology, filename, "
                "content_hash, client_id) VALUES (?, 'ingestion', 'pending', ?, ?, ?, ?, ?)",
                (job_id, time.time(), ontology, filename, digest, client_id))
        return job_id

    def start(self, job_id: str, text: str, filename: str, ontology: str) -> None:
        """Queue the job for the worker (see :attr:`accepting`)."""
        if self._queue is None:
            raise RuntimeError("no job worker runs: the app's lifespan has not started")
        self._queue.send_nowait((job_id, text, filename, ontology))

    def _update(self, job_id: str, **fields: object) -> None:
        for key in ("progress", "result"):
            if key in fields and fields[key] is not None:
                fields[key] = json.dumps(fields[key])
        assignments = ", ".join(f"{k} = ?" for k in fields)
        with self.graph.store.transaction() as conn:
            conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?",
                         (*fields.values(), job_id))

    async def _run(self, job_id: str, text: str, filename: str, ontology: str) -> None:
        try:
            await anyio.to_thread.run_sync(self._work, job_id, text, filename, ontology)
        except Exception as exc:  # a failed job reports why instead of vanishing
            log.exception("job %s failed", job_id)
            error = f"{type(exc).__name__}: {exc}"
            await anyio.to_thread.run_sync(
                lambda: self._update(job_id, status="failed", error=error,
                                     completed_at=time.time()))

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise JobInterrupted("the server stopped before the job finished")

    def _work(self, job_id: str, text: str, filename: str, ontology: str) -> None:
        try:
            self._stages(job_id, text, filename, ontology)
        except JobInterrupted as exc:  # recorded here: the awaiting task is cancelled
            log.warning("job %s: %s", job_id, exc)
            self._update(job_id, status="failed", error=str(exc), completed_at=time.time())

    def _stages(self, job_id: str, text: str, filename: str, ontology: str) -> None:
        started = time.time()
        self._update(job_id, status="running", started_at=started,
                     progress={"stage": "parsing", "percent": 0})
        doc = parse_text_document(text, filename, ontology, source_type="api")
        self._check_stopping()
        total = len(doc.concepts)
        self._update(job_id, progress={"stage": "embedding", "percent": 30,
                                       "chunks_total": len(doc.chunks),
                                       "concepts_total": total})
        self._check_stopping()
        held = repository.document_in_ontology(self.graph.store, text, ontology)
        if held is not None:  # a forced re-ingest replaces this ontology's copy, no other
            self.graph.remove_document(held)
        outcome = self.graph.add_documents([doc], created_by=job_id)
        embedded = outcome.concepts_created
        result: dict = {"concepts_created": embedded, "chunks": len(doc.chunks),
                        "document_id": repository.document_in_ontology(
                            self.graph.store, text, ontology)}
        if outcome.near_duplicates:
            result["warnings"] = [near_duplicate_warning(d) for d in outcome.near_duplicates]
            result["near_duplicates"] = outcome.near_duplicates
        self._update(job_id, status="completed", completed_at=time.time(), result=result,
                     progress={"stage": "completed", "percent": 100,
                               "chunks_total": len(doc.chunks),
                               "chunks_processed": len(doc.chunks),
                               "concepts_total": total})
        log.info("job %s ingested %s into %r: %d concepts in %.1f s", job_id, filename,
                 ontology, embedded, time.time() - started)

    def get(self, job_id: str) -> dict | None:
        row = self.graph.store.query_one("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if row is None:
            return None
        return {
            "job_id": row["id"], "job_type": row["job_type"], "status": row["status"],
            "progress": json.loads(row["progress"]) if row["progress"] else None,
            "result": json.loads(row["result"]) if row["result"] else None,
            "error": row["error"], "created_at": iso(row["created_at"]),
            "started_at": iso(row["started_at"]), "completed_at": iso(row["completed_at"]),
            "ontology": row["ontology"], "filename": row["filename"],
            "content_hash": row["content_hash"],
        }
