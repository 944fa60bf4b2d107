"""``POST /query/search`` and ``GET /query/concept/{id}``.

Embedding the query and scanning the matrix run in a worker thread, so a search never
blocks the event loop. Every search writes one INFO line to ``kg_fuse.server.requests``
saying whether the client sent ``min_similarity``.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Depends, HTTPException

from kg_fuse.limits import shown
from kg_fuse.server.auth import Principal
from kg_fuse.server.deps import AppContext, AuthFirstRoute, get_ctx, require_user
from kg_fuse.server.schemas import (
    ConceptDetailsResponse,
    ConceptInstance,
    ConceptProvenance,
    ConceptRelationship,
    ConceptSearchResult,
    ProvenanceDocument,
    SearchRequest,
    SearchResponse,
)
from kg_fuse.server.service import KnowledgeGraph

log = logging.getLogger(__name__)
request_log = logging.getLogger("kg_fuse.server.requests")

router = APIRouter(route_class=AuthFirstRoute)

Ctx = Annotated[AppContext, Depends(get_ctx)]
User = Annotated[Principal, Depends(require_user)]


def _run_search(graph: KnowledgeGraph, body: SearchRequest) -> SearchResponse:
    threshold = (body.min_similarity if body.min_similarity is not None
                 else graph.default_threshold())
    outcome = graph.search(body.query, threshold, body.limit, body.offset, body.ontology)
    ids = [cid for cid, _ in outcome.page]
    if outcome.near_miss is not None:
        ids.append(outcome.near_miss.top_id)
    summaries = graph.concept_summaries(ids)

    def result(cid: str, score: float) -> ConceptSearchResult:
        summary = summaries[cid]
        evidence = None
        if body.include_evidence:
            evidence = [ConceptInstance(**i) for i in graph.sample_evidence(cid)]
        return ConceptSearchResult(concept_id=cid, score=score, sample_evidence=evidence,
                                   **summary)

    results = [result(cid, score) for cid, score in outcome.page]
    near = outcome.near_miss
    return SearchResponse(
        query=body.query,
        count=len(results),
        results=results,
        below_threshold_count=near.count if near else None,
        suggested_threshold=near.suggested if near else None,
        top_match=result(near.top_id, near.top_score) if near else None,
        threshold_used=threshold,
        offset=body.offset,
    )


@router.post("/query/search", response_model=SearchResponse)
async def search(body: SearchRequest, ctx: Ctx, _user: User) -> SearchResponse:
    response = await anyio.to_thread.run_sync(_run_search, ctx.graph, body)
    sent = "omitted" if body.min_similarity is None else body.min_similarity
    request_log.info("search min_similarity=%s threshold_used=%s count=%d query=%s",
                     sent, response.threshold_used, response.count, shown(body.query))
    return response


def _concept_details(graph: KnowledgeGraph, concept_id: str) -> ConceptDetailsResponse:
    store = graph.store
    row = store.query_one("SELECT id, label, description, search_terms, signature "
                          "FROM concepts WHERE id = ?", (concept_id,))
    if row is None:
        raise HTTPException(status_code=404, detail=f"Concept '{concept_id}' not found")
    relationships = [
        ConceptRelationship(to_id=r["to_id"], to_label=r["label"], rel_type=r["rel_type"],
                            confidence=r["confidence"],
                            source="inference" if r["rel_type"] == "SIMILAR_TO"
                            else "extraction")
        for r in store.query(
            "SELECT r.to_id, c.label, r.rel_type, r.confidence FROM relationships r "
            "JOIN concepts c ON c.id = r.to_id WHERE r.from_id = ? "
            "ORDER BY r.rel_type, r.confidence DESC, c.label", (concept_id,))
    ]
    provenance_docs = [
        ProvenanceDocument(document_id=r["id"], filename=r["filename"],
                           source_type=r["source_type"], source_path=r["source_path"],
                           source_count=r["n"])
        for r in store.query(
            "SELECT d.id, d.filename, d.source_type, d.source_path, "
            "COUNT(DISTINCT c.source_id) AS n FROM instances i "
            "JOIN chunks c ON c.source_id = i.source_id "
            "JOIN documents d ON d.id = c.document_id WHERE i.concept_id = ? "
            "GROUP BY d.id ORDER BY d.filename", (concept_id,))
    ]
    return ConceptDetailsResponse(
        concept_id=row["id"],
        label=row["label"],
        description=row["description"] or "",
        search_terms=json.loads(row["search_terms"] or "[]"),
        documents=graph.ontologies_of([concept_id]).get(concept_id, []),
        instances=[ConceptInstance(**i) for i in graph.instances(concept_id)],
        relationships=relationships,
        provenance=ConceptProvenance(documents=provenance_docs),
        signature=row["signature"] or None,
    )


@router.get("/query/concept/{concept_id}", response_model=ConceptDetailsResponse)
def concept_details(concept_id: str, ctx: Ctx, _user: User) -> ConceptDetailsResponse:
    return _concept_details(ctx.graph, concept_id)
