"""Browsing: epoch, catalog children, ontology info and document content.

These are plain SQLite reads, so the handlers are sync functions, which FastAPI runs in
its thread pool.
"""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query

from kg_fuse.limits import MAX_NAME_CHARS
from kg_fuse.server.auth import Principal
from kg_fuse.server.deps import AppContext, AuthFirstRoute, get_ctx, require_user
from kg_fuse.server.schemas import (
    CatalogNode,
    CatalogResponse,
    DocumentChunk,
    DocumentContentResponse,
    EpochResponse,
    OntologyInfoResponse,
    OntologyNode,
    OntologyStatistics,
)
from kg_fuse.server.store import Store

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)

Ctx = Annotated[AppContext, Depends(get_ctx)]
User = Annotated[Principal, Depends(require_user)]

SQLITE_INT_MAX = 2**63 - 1  # larger offsets cannot be bound: 422, not 500
_SORTS = {"name": "name COLLATE NOCASE, id", "child_count": "child_count DESC, name, id",
          "created": "created_at, name, id"}

_ONTOLOGY_CHILDREN = """
SELECT o.id, o.name, o.created_at,
       (SELECT COUNT(*) FROM documents d WHERE d.ontology_id = o.id) AS child_count
FROM ontologies o
"""
_DOCUMENT_CHILDREN = """
SELECT d.id, d.name, d.created_at, d.content_type, d.filename,
       (SELECT COUNT(DISTINCT i.concept_id) FROM chunks c
        JOIN instances i ON i.source_id = c.source_id WHERE c.document_id = d.id)
       AS child_count
FROM documents d WHERE d.ontology_id = :parent
"""
_CONCEPT_CHILDREN = """
SELECT k.id, k.label AS name, k.created_at, 0 AS child_count
FROM concepts k WHERE k.id IN (SELECT i.concept_id FROM instances i
    JOIN chunks c ON c.source_id = i.source_id WHERE c.document_id = :parent)
"""


@router.get("/database/epoch", response_model=EpochResponse)
def epoch(ctx: Ctx, _user: User) -> EpochResponse:
    return EpochResponse(epoch=ctx.graph.store.epoch())


def _like(q: str) -> str:
    return "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _resolve_parent(store: Store, parent: str, kind: str | None) -> tuple[str, str]:
    """(kind, id) of the parent; ontologies may also be named instead of id'd."""
    if kind is None:
        kind = "document" if parent.startswith("sha256:") else "ontology"
    if kind == "ontology":
        row = store.query_one("SELECT id FROM ontologies WHERE id = ? OR name = ? "
                              "ORDER BY id = ? DESC", (parent, parent, parent))
        if row is None:
            raise HTTPException(status_code=404, detail=f"Ontology not found: {parent}")
        return kind, row["id"]
    if store.query_one("SELECT 1 FROM documents WHERE id = ?", (parent,)) is None:
        raise HTTPException(status_code=404, detail=f"Document not found: {parent}")
    return kind, parent


@router.get("/catalog/children", response_model=CatalogResponse)
def catalog_children(
    ctx: Ctx,
    _user: User,
    parent: Annotated[str | None, Query(max_length=MAX_NAME_CHARS)] = None,
    parent_kind: Literal["ontology", "document"] | None = None,
    q: Annotated[str | None, Query(max_length=MAX_NAME_CHARS)] = None,
    sort: Literal["name", "child_count", "created"] = "name",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=SQLITE_INT_MAX)] = 0,
) -> CatalogResponse:
    store = ctx.graph.store
    if parent is None:
        kind, parent_id, base, child_kind = None, None, _ONTOLOGY_CHILDREN + " WHERE 1", \
            "ontology"
    else:
        kind, parent_id = _resolve_parent(store, parent, parent_kind)
        base, child_kind = ((_DOCUMENT_CHILDREN, "document") if kind == "ontology"
                            else (_CONCEPT_CHILDREN, "concept"))
    params: dict[str, object] = {"parent": parent_id}
    sql = f"SELECT * FROM ({base}) AS x"
    if q:
        sql += " WHERE name LIKE :q ESCAPE '\\'"
        params["q"] = _like(q)
    total = int(store.scalar(f"SELECT COUNT(*) FROM ({sql})", params) or 0)
    rows = store.query(f"{sql} ORDER BY {_SORTS[sort]} LIMIT :limit OFFSET :offset",
                       {**params, "limit": limit, "offset": offset})
    nodes = [
        CatalogNode(
            kind=child_kind, id=r["id"], name=r["name"], parent_id=parent_id,
            child_count=r["child_count"],
            content_type=r["content_type"] if child_kind == "document" else None,
            properties={"filename": r["filename"], "created_at": r["created_at"]}
            if child_kind == "document" else {"created_at": r["created_at"]},
        )
        for r in rows
    ]
    return CatalogResponse(parent_id=parent_id, parent_kind=kind, child_kind=child_kind,
                           nodes=nodes, total=total, limit=limit, offset=offset, query=q)


@router.get("/ontology/{name:path}", response_model=OntologyInfoResponse)
def ontology_info(name: str, ctx: Ctx, _user: User) -> OntologyInfoResponse:
    store = ctx.graph.store
    row = store.query_one("SELECT * FROM ontologies WHERE name = ?", (name,))
    if row is None:
        raise HTTPException(status_code=404, detail=f"Ontology '{name}' not found")
    ont = row["id"]
    in_ont = ("SELECT i.concept_id FROM instances i JOIN chunks c ON c.source_id = i.source_id"
              " JOIN documents d ON d.id = c.document_id WHERE d.ontology_id = :o")
    stats = OntologyStatistics(
        source_count=int(store.scalar(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.ontology_id = :o", {"o": ont}) or 0),
        file_count=int(store.scalar("SELECT COUNT(*) FROM documents WHERE ontology_id = :o",
                                    {"o": ont}) or 0),
        concept_count=int(store.scalar(f"SELECT COUNT(DISTINCT concept_id) FROM ({in_ont})",
                                       {"o": ont}) or 0),
        instance_count=int(store.scalar(f"SELECT COUNT(*) FROM ({in_ont})", {"o": ont}) or 0),
        relationship_count=int(store.scalar(
            f"SELECT COUNT(*) FROM relationships WHERE from_id IN ({in_ont})",
            {"o": ont}) or 0),
    )
    files = [r["filename"] for r in store.query(
        "SELECT filename FROM documents WHERE ontology_id = ? ORDER BY filename", (ont,))]
    node = OntologyNode(ontology_id=ont, name=row["name"], description=row["description"],
                        creation_epoch=row["creation_epoch"], created_by=row["created_by"])
    return OntologyInfoResponse(ontology=row["name"], statistics=stats, files=files,
                                node=node)


@router.get("/documents/{document_id}/content", response_model=DocumentContentResponse)
def document_content(document_id: str, ctx: Ctx, _user: User) -> DocumentContentResponse:
    store = ctx.graph.store
    row = store.query_one("SELECT id, content, content_type FROM documents WHERE id = ?",
                          (document_id,))
    if row is None:
        raise HTTPException(status_code=404, detail=f"Document not found: {document_id}")
    chunks = [
        DocumentChunk(source_id=r["source_id"], paragraph=r["paragraph"],
                      full_text=r["full_text"], char_offset_start=r["char_start"],
                      char_offset_end=r["char_end"])
        for r in store.query("SELECT * FROM chunks WHERE document_id = ? ORDER BY paragraph",
                             (document_id,))
    ]
    return DocumentContentResponse(
        document_id=row["id"], content_type=row["content_type"],
        content={"document": row["content"], "encoding": "utf-8"}, chunks=chunks)
