"""The document endpoints: its content (both clients read it), and those the platform's
own FUSE client calls besides: its concepts (the client's tags), deleting it, image
ingestion and a source's image."""

from __future__ import annotations

import logging
import os
from typing import Annotated

from fastapi import APIRouter, Form, HTTPException
from starlette.concurrency import run_in_threadpool

from kg_fuse.limits import MAX_IMAGE_BYTES, MAX_NAME_CHARS, MIN_IMAGE_BYTES, shown
from kg_fuse.server.api.deps import AuthFirstRoute, Changes, Storage, Upload, User
from kg_fuse.server.api.schemas import (
    DocumentConceptsResponse,
    DocumentContentResponse,
    DocumentDeleteResponse,
)
from kg_fuse.server.knowledge import duplicates
from kg_fuse.server.storage import reads

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)


IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")
NO_VISION_MODEL = ("Image ingestion is not available: this embedded server has no vision "
                   "model to describe images. Ingest a text or Markdown description instead.")


@router.get("/documents/{document_id}/content", response_model=DocumentContentResponse)
def document_content(document_id: str, store: Storage, _user: User
                     ) -> DocumentContentResponse:
    row = reads.document(store, document_id)
    return DocumentContentResponse(
        document_id=row["id"], content_type=row["content_type"],
        content={"document": row["content"], "encoding": "utf-8"},
        chunks=reads.chunks(store, document_id))  # each row validated as a DocumentChunk


@router.get("/documents/{document_id}/concepts", response_model=DocumentConceptsResponse)
def document_concepts(document_id: str, store: Storage, _user: User
                      ) -> DocumentConceptsResponse:
    """One row per (concept, source) pair of the document, most instances first."""
    row = reads.document(store, document_id)
    concepts = reads.document_concepts(store, document_id)  # each a DocumentConcept
    return DocumentConceptsResponse(
        document_id=document_id, filename=row["filename"] or "unknown", concepts=concepts,
        total=len(concepts),
        warnings=duplicates.warnings(reads.near_duplicates(row)))


@router.delete("/documents/{document_id}", response_model=DocumentDeleteResponse)
def delete_document(document_id: str, changes: Changes, user: User
                    ) -> DocumentDeleteResponse:
    """The document, its chunks and evidence, and the concepts left without evidence."""
    result = changes.remove_document(document_id)
    if result is None:
        raise HTTPException(status_code=404, detail=f"Document '{document_id}' not found")
    log.info("%s deleted document %s", user.client_id, shown(document_id, 80))
    return DocumentDeleteResponse(document_id=document_id, deleted=True, **result)


@router.post("/ingest/image")
async def ingest_image(
    user: User,
    form: Upload,
    source_type: Annotated[str | None, Form(max_length=MAX_NAME_CHARS)] = None,
) -> None:
    """The platform's validation, in its order, then a refusal: no vision model here."""
    name = form.filename or form.file.filename
    if not name:
        raise HTTPException(status_code=400, detail="Filename is required")
    ext = os.path.splitext(name)[1].lower()
    if ext not in IMAGE_EXTENSIONS:
        raise HTTPException(status_code=400, detail=(
            f"Unsupported image format: {shown(ext, 20)}. Supported: "
            + ", ".join(IMAGE_EXTENSIONS)))
    size = len(await form.file.read(MAX_IMAGE_BYTES + 1))
    if size > MAX_IMAGE_BYTES:
        raise HTTPException(status_code=400, detail=(
            f"Image too large: more than {MAX_IMAGE_BYTES // (1024 * 1024)} MB "
            f"(limit {MAX_IMAGE_BYTES} bytes)"))
    if size < MIN_IMAGE_BYTES:
        raise HTTPException(status_code=400, detail=(
            f"Image too small: {size} bytes (at least {MIN_IMAGE_BYTES})"))
    log.info("%s: refused image %s for ontology %s: no vision model", user.client_id,
             shown(name, 80), shown(form.ontology, 80))
    raise HTTPException(status_code=400, detail=NO_VISION_MODEL)


@router.get("/sources/{source_id}/image")
async def source_image(source_id: str, store: Storage, _user: User) -> None:
    content_type = await run_in_threadpool(reads.source_content_type, store, source_id)
    if content_type == "image":  # no image bytes are ever stored
        raise HTTPException(status_code=404, detail=f"Source not found: {source_id}")
    raise HTTPException(status_code=400, detail=(
        f"Source {source_id} is not an image (content_type={content_type!r})"))
