"""Ontologies: reading one's statistics, files and node, creating one, deleting one."""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException

from kg_fuse.limits import shown
from kg_fuse.server.api.deps import AuthFirstRoute, Changes, Storage, User
from kg_fuse.server.api.schemas import (
    OntologyCreateRequest,
    OntologyDeleteResponse,
    OntologyInfoResponse,
    OntologyNode,
    OntologyStatistics,
)
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)

router = APIRouter(route_class=AuthFirstRoute)


def _info(store: Store, name: str) -> OntologyInfoResponse:
    """An ontology's statistics, files and node (:class:`reads.NotFound` when unknown):
    what reading it answers, and what creating it does."""
    row = reads.ontology(store, name)
    node = OntologyNode(ontology_id=row["id"], name=row["name"],
                        description=row["description"],
                        creation_epoch=row["creation_epoch"], created_by=row["created_by"])
    return OntologyInfoResponse(
        ontology=row["name"],
        statistics=OntologyStatistics(**reads.ontology_statistics(store, row["id"])),
        files=reads.ontology_files(store, row["id"]), node=node)


@router.get("/ontology/{name:path}", response_model=OntologyInfoResponse)
def ontology_info(name: str, store: Storage, _user: User) -> OntologyInfoResponse:
    return _info(store, name)


@router.post("/ontology/", status_code=201, response_model=OntologyInfoResponse)
def create_ontology(body: OntologyCreateRequest, changes: Changes, store: Storage,
                    user: User) -> OntologyInfoResponse:
    try:
        changes.create_ontology(body.name, body.description, created_by=user.client_id)
    except FileExistsError:
        raise HTTPException(status_code=409,
                            detail=f"Ontology '{body.name}' already exists") from None
    log.info("%s created ontology %s", user.client_id, shown(body.name))
    return _info(store, body.name)


@router.delete("/ontology/{name:path}", response_model=OntologyDeleteResponse)
def delete_ontology(name: str, changes: Changes, user: User) -> OntologyDeleteResponse:
    result = changes.remove_ontology(name)
    if result is None:
        raise HTTPException(status_code=404, detail=f"Ontology '{name}' not found")
    log.info("%s deleted ontology %s", user.client_id, shown(name))
    return OntologyDeleteResponse(ontology=name, deleted=True, **result)
