"""Ingesting a document, and its job's status."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from kg_fuse.limits import MAX_INGEST_BYTES, shown
from kg_fuse.server.api.deps import AuthFirstRoute, Jobs, Upload, User
from kg_fuse.server.api.schemas import DuplicateResponse, IngestResponse, JobResponse
from kg_fuse.server.corpus import content_hash
from kg_fuse.server.knowledge.jobs import QueueFull, ShuttingDown, UploadedDocument

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)

RETRY_AFTER = 10  # seconds, in a 429's Retry-After: about one job of a few sections


async def _text_of(form: Upload) -> tuple[str, int]:
    """The upload's text and its size in bytes: 413 past the cap, 400 when it is not
    UTF-8 or holds nothing."""
    raw = await form.file.read(MAX_INGEST_BYTES + 1)
    if len(raw) > MAX_INGEST_BYTES:
        raise HTTPException(status_code=413,
                            detail=f"File too large (limit {MAX_INGEST_BYTES} bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HTTPException(status_code=400,
                            detail="Only UTF-8 text documents can be ingested") from None
    if not text.strip():
        raise HTTPException(status_code=400, detail="The document is empty")
    return text, len(raw)


@router.post("/ingest", response_model=IngestResponse | DuplicateResponse)
async def ingest(jobs: Jobs, user: User, form: Upload) -> IngestResponse | JSONResponse:
    """Queue a text document; the same content twice is a duplicate unless ``force``."""
    text, size = await _text_of(form)
    upload = UploadedDocument(
        text=text, filename=form.filename or form.file.filename or "document.txt",
        ontology=form.ontology, client_id=user.client_id, size=size,
        digest=content_hash(text))
    if not form.force:
        duplicate = await run_in_threadpool(jobs.duplicate_of, upload)
        if duplicate is not None:
            return JSONResponse(DuplicateResponse(
                existing_job_id=duplicate.existing_job_id, status=duplicate.status,
                message=f"Document already ingested {duplicate.where}; use force to "
                        "re-ingest", content_hash=upload.digest).model_dump())
    try:
        job_id = await jobs.submit(upload)
    except ShuttingDown as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from None
    except QueueFull as exc:
        log.info("%s: ingest of %s refused: %s", user.client_id, shown(upload.filename), exc)
        raise HTTPException(status_code=429, detail=str(exc),
                            headers={"Retry-After": str(RETRY_AFTER)}) from None
    log.info("%s queued %s for ontology %s as %s (auto_approve=%s)", user.client_id,
             shown(upload.filename), shown(upload.ontology), job_id, form.auto_approve)
    return IngestResponse(job_id=job_id, status="pending", content_hash=upload.digest,
                          message="Job queued; the embedded server approves jobs "
                                  "automatically")


@router.get("/jobs/{job_id}", response_model=JobResponse)
def get_job(job_id: str, jobs: Jobs, _user: User) -> JobResponse:
    job = jobs.get(job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"Job not found: {job_id}")
    return JobResponse(**job)
