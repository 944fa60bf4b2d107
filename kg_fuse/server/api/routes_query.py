"""``POST /query/search`` and ``GET /query/concept/{id}``.

Embedding the query and scanning the matrix run in a worker thread, so a search never
blocks the event loop. Every search writes one INFO line to ``kg_fuse.server.requests``
saying whether the client sent ``min_similarity``.
"""

from __future__ import annotations

import json
import logging
import math

import anyio.to_thread
from fastapi import APIRouter, Response

from kg_fuse.limits import shown
from kg_fuse.server.api.deps import AuthFirstRoute, Ctx, Storage, User
from kg_fuse.server.api.schemas import (
    ConceptDetailsResponse,
    ConceptInstance,
    ConceptProvenance,
    ConceptRelationship,
    ConceptSearchResult,
    NearMissHit,
    ProvenanceDocument,
    SearchRequest,
    SearchResponse,
)
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)
request_log = logging.getLogger("kg_fuse.server.requests")

router = APIRouter(route_class=AuthFirstRoute)

SAMPLE_EVIDENCE = 3  # instances per result when include_evidence is set



def _run_search(graph: KnowledgeGraph, store: Store, body: SearchRequest) -> SearchResponse:
    threshold = (body.min_similarity if body.min_similarity is not None
                 else graph.default_threshold())
    outcome = graph.search(body.query, threshold, body.limit, body.offset, body.ontology)
    ids = [cid for cid, _ in outcome.page] + [cid for cid, _ in outcome.closest]
    if outcome.near_miss is not None:
        ids.append(outcome.near_miss.top_id)
    summaries = graph.summaries(ids)

    def result(cid: str, score: float) -> ConceptSearchResult:
        summary = summaries[cid]
        evidence = None
        if body.include_evidence:
            evidence = _instances(store, cid, SAMPLE_EVIDENCE)
        return ConceptSearchResult(concept_id=cid, score=score, sample_evidence=evidence,
                                   **summary)

    results = [result(cid, score) for cid, score in outcome.page]
    near = outcome.near_miss
    reading = graph.read(body.query)
    closest = [NearMissHit(concept_id=cid, label=summaries[cid]["label"], score=score)
               for cid, score in outcome.closest]
    return SearchResponse(
        query=body.query,
        count=len(results),
        results=results,
        below_threshold_count=near.count if near else None,
        suggested_threshold=near.suggested if near else None,
        top_match=result(near.top_id, near.top_score) if near else None,
        threshold_used=threshold,
        offset=body.offset,
        threshold_presets=graph.threshold.presets(),
        unknown_words=reading.unknown_words(),
        expanded_words=reading.expansions(),
        repeated_words=list(reading.repeated) or None,
        near_misses=closest or None,
        near_miss_threshold=just_below(closest[0].score) if closest else None,
    )


def just_below(score: float) -> float:
    """A threshold (two decimals) that lists a concept of this score: its score rounded
    down, so writing it to ``.meta/threshold`` shows the best near miss and those close
    to it, not everything down to the noise floor."""
    return max(0.0, math.floor(score * 100 + 1e-9) / 100)


@router.post("/query/search", response_model=SearchResponse)
async def search(body: SearchRequest, ctx: Ctx, store: Storage, _user: User) -> Response:
    """The response is serialised once, here, from the model built in ``_run_search``
    (returning the model would make FastAPI dump, validate and dump it again)."""
    response = await anyio.to_thread.run_sync(_run_search, ctx.graph, store, body)
    sent = "omitted" if body.min_similarity is None else body.min_similarity
    request_log.info("search min_similarity=%s threshold_used=%s count=%d query=%s",
                     sent, response.threshold_used, response.count, shown(body.query))
    return Response(response.model_dump_json(), media_type="application/json")


def _instances(store: Store, concept_id: str, limit: int = -1) -> list[ConceptInstance]:
    """A concept's evidence, oldest first, as the contract's instances."""
    return [ConceptInstance(**i) for i in reads.instances(store, concept_id, limit)]


def _concept_details(store: Store, concept_id: str) -> ConceptDetailsResponse:
    row = reads.concept(store, concept_id)
    relationships = [
        ConceptRelationship(to_id=r["to_id"], to_label=r["label"], rel_type=r["rel_type"],
                            confidence=r["confidence"],
                            source="inference" if r["rel_type"] == "SIMILAR_TO"
                            else "extraction")
        for r in reads.relationships(store, concept_id)
    ]
    provenance_docs = [ProvenanceDocument(**r)
                       for r in reads.provenance_documents(store, concept_id)]
    return ConceptDetailsResponse(
        concept_id=row["id"],
        label=row["label"],
        description=row["description"] or "",
        search_terms=json.loads(row["search_terms"] or "[]"),
        documents=reads.ontologies_of(store, [concept_id]).get(concept_id, []),
        instances=_instances(store, concept_id),
        relationships=relationships,
        provenance=ConceptProvenance(documents=provenance_docs),
        signature=row["signature"] or None,
    )


@router.get("/query/concept/{concept_id}", response_model=ConceptDetailsResponse)
def concept_details(concept_id: str, store: Storage, _user: User
                    ) -> ConceptDetailsResponse:
    return _concept_details(store, concept_id)
