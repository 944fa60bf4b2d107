"""Writing: ontology create/delete, document ingest and job status."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from kg_fuse.limits import MAX_INGEST_BYTES, shown
from kg_fuse.server.api.deps import AuthFirstRoute, Ctx, Upload, User
from kg_fuse.server.api.schemas import (
    DuplicateResponse,
    IngestResponse,
    JobResponse,
    OntologyCreateRequest,
    OntologyDeleteResponse,
    OntologyInfoResponse,
)
from kg_fuse.server.corpus import content_hash
from kg_fuse.server.knowledge.jobs import QueuedJob, QueueFull
from kg_fuse.server.storage import reads, writes

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)

RETRY_AFTER = 10  # seconds, in a 429's Retry-After: about one job of a few sections


@router.post("/ontology/", status_code=201, response_model=OntologyInfoResponse)
def create_ontology(body: OntologyCreateRequest, ctx: Ctx, user: User) -> OntologyInfoResponse:
    from kg_fuse.server.api.routes_catalog import ontology_info

    try:
        writes.create_ontology(ctx.store, body.name, body.description,
                                created_by=user.client_id)
    except FileExistsError:
        raise HTTPException(status_code=409,
                            detail=f"Ontology '{body.name}' already exists") from None
    log.info("%s created ontology %s", user.client_id, shown(body.name))
    return ontology_info(body.name, ctx, user)


@router.delete("/ontology/{name:path}", response_model=OntologyDeleteResponse)
def delete_ontology(name: str, ctx: Ctx, user: User) -> OntologyDeleteResponse:
    result = ctx.graph.changes.remove_ontology(name)
    if result is None:
        raise HTTPException(status_code=404, detail=f"Ontology '{name}' not found")
    log.info("%s deleted ontology %s", user.client_id, shown(name))
    return OntologyDeleteResponse(ontology=name, deleted=True, **result)


@router.post("/ingest", response_model=IngestResponse | DuplicateResponse)
async def ingest(
    ctx: Ctx, user: User, form: Upload) -> IngestResponse | JSONResponse:
    """Queue a text document; the same content twice is a duplicate unless ``force``."""
    ontology = form.ontology
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
    name = form.filename or form.file.filename or "document.txt"
    digest = content_hash(text)
    jobs = ctx.jobs
    if not form.force:
        stored = await run_in_threadpool(reads.document_in_ontology, ctx.store,
                                         text, ontology)
        previous = await run_in_threadpool(jobs.existing_job, digest, ontology)
        active = previous is not None and previous["status"] in ("pending", "running")
        if stored is not None or active:
            where = (f"in ontology '{ontology}'" if stored is not None
                     else f"by a running job for ontology '{ontology}'")
            dup = DuplicateResponse(
                existing_job_id=previous["id"] if previous else None,
                status=previous["status"] if previous else "completed",
                message=f"Document already ingested {where}; use force to re-ingest",
                content_hash=digest)
            return JSONResponse(dup.model_dump())
    if not jobs.accepting:
        raise HTTPException(status_code=503, detail="The server is shutting down; retry "
                                                    "the upload later")
    try:
        jobs.admit(user.client_id, len(raw))
    except QueueFull as exc:
        log.info("%s: ingest of %s refused: %s", user.client_id, shown(name), exc)
        raise HTTPException(status_code=429, detail=str(exc),
                            headers={"Retry-After": str(RETRY_AFTER)}) from None
    try:
        job_id = await run_in_threadpool(jobs.insert, digest, name, ontology, user.client_id)
        jobs.start(QueuedJob(job_id, text, name, ontology, user.client_id, len(raw)))
    except BaseException:
        jobs.release(user.client_id, len(raw))
        raise
    log.info("%s queued %s for ontology %s as %s (auto_approve=%s)", user.client_id,
             shown(name), shown(ontology), job_id, form.auto_approve)
    return IngestResponse(job_id=job_id, status="pending", content_hash=digest,
                          message="Job queued; the embedded server approves jobs "
                                  "automatically")


@router.get("/jobs/{job_id}", response_model=JobResponse)
def get_job(job_id: str, ctx: Ctx, _user: User) -> JobResponse:
    job = ctx.jobs.get(job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"Job not found: {job_id}")
    return JobResponse(**job)
