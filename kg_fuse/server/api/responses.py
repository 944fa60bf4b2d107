"""Bodies of the contract that more than one route answers with, made from storage's
reads (a route never calls another route's handler)."""

from __future__ import annotations

from kg_fuse.server.api.schemas import OntologyInfoResponse, OntologyNode, OntologyStatistics
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store


def ontology_info(store: Store, name: str) -> OntologyInfoResponse:
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
