"""Browsing: the epoch and the catalog's children (an ontology's info is
:mod:`.routes_ontology`'s, a document's content :mod:`.routes_documents`').

These are plain SQLite reads (:mod:`kg_fuse.server.storage.reads`), so the handlers are
sync functions, which FastAPI runs in its thread pool.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from kg_fuse.limits import MAX_NAME_CHARS
from kg_fuse.server.api.deps import AuthFirstRoute, Storage, Threshold, User
from kg_fuse.server.api.schemas import CatalogNode, CatalogResponse, EpochResponse
from kg_fuse.server.knowledge import duplicates
from kg_fuse.server.storage import reads

router = APIRouter(route_class=AuthFirstRoute)

SQLITE_INT_MAX = 2**63 - 1  # larger offsets cannot be bound: 422, not 500


@router.get("/database/epoch", response_model=EpochResponse)
def epoch(store: Storage, threshold: Threshold, _user: User) -> EpochResponse:
    """The content epoch, and the default threshold with its presets: every client polls
    this, so a PUT default reaches all of them within one poll, with no search. And the
    server's identity, which a mount asks for as it starts."""
    return EpochResponse(epoch=store.epoch(), default_threshold=threshold.default(),
                         threshold_presets=threshold.presets(), server_id=store.server_id())


def _node(child_kind: reads.ChildKind, parent_id: str | None, row) -> CatalogNode:
    if child_kind == "document":
        near = reads.near_duplicates(row)
        # a document's status: near-duplicate sections found at ingestion are warnings
        properties = {"filename": row["filename"], "created_at": row["created_at"],
                      "warnings": duplicates.warnings(near),
                      "near_duplicates": near}
    else:
        properties = {"created_at": row["created_at"]}
    return CatalogNode(kind=child_kind, id=row["id"], name=row["name"], parent_id=parent_id,
                       child_count=row["child_count"],
                       content_type=row["content_type"] if child_kind == "document" else None,
                       properties=properties)


@router.get("/catalog/children", response_model=CatalogResponse)
def catalog_children(
    store: Storage,
    _user: User,
    parent: Annotated[str | None, Query(max_length=MAX_NAME_CHARS)] = None,
    parent_kind: Literal["ontology", "document"] | None = None,
    q: Annotated[str | None, Query(max_length=MAX_NAME_CHARS)] = None,
    sort: Literal["name", "child_count", "created"] = "name",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=SQLITE_INT_MAX)] = 0,
) -> CatalogResponse:
    kind: str | None = None
    parent_id: str | None = None
    child_kind: reads.ChildKind = "ontology"
    if parent is not None:
        kind, parent_id = reads.resolve_parent(store, parent, parent_kind)
        child_kind = "document" if kind == "ontology" else "concept"
    page = reads.children(store, child_kind, parent_id, q, sort, limit, offset)
    return CatalogResponse(parent_id=parent_id, parent_kind=kind, child_kind=child_kind,
                           nodes=[_node(child_kind, parent_id, r) for r in page.rows],
                           total=page.total, limit=limit, offset=offset, query=q)
