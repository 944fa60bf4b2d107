"""``POST /query/search`` and ``GET /query/concept/{id}``.

Embedding the query and scanning the matrix run in a worker thread, so a search never
blocks the event loop. Every search writes one INFO line to ``kg_fuse.server.requests``
saying whether the client sent ``min_similarity``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Response

from kg_fuse.limits import shown
from kg_fuse.server.api.deps import AuthFirstRoute, Search, Storage, User
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
from kg_fuse.server.knowledge.search_service import Hit, SearchAnswer, SearchService
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)
request_log = logging.getLogger("kg_fuse.server.requests")

router = APIRouter(route_class=AuthFirstRoute)


def _result(hit: Hit) -> ConceptSearchResult:
    evidence = None if hit.evidence is None else [ConceptInstance(**i) for i in hit.evidence]
    return ConceptSearchResult(concept_id=hit.concept_id, score=hit.score,
                               sample_evidence=evidence, why=_why(hit),  # type: ignore[arg-type]
                               **hit.summary)


def _why(hit: Hit) -> dict[str, Any] | None:
    """The result's ``why`` as plain data, for its ``ScoreWhy`` to validate: a search's
    50 results built as models first cost more than the rest of its answer."""
    parts = hit.why
    if parts is None:
        return None
    return {"meaning": parts.meaning, "words": parts.words, "keyword": parts.keyword,
            "familiarity": parts.familiarity,
            "matched": [{"word": m.word, "term": m.term, "reading": m.reading, "via": m.via,
                         "part": m.part} for m in parts.matched]}


def _response(answer: SearchAnswer, ontology: str | None) -> SearchResponse:
    """The answer in the contract's words (and our extra fields)."""
    near, reading = answer.near_miss, answer.reading
    return SearchResponse(
        query=answer.query,
        count=len(answer.hits),
        results=[_result(hit) for hit in answer.hits],
        below_threshold_count=near.count if near else None,
        suggested_threshold=near.suggested if near else None,
        top_match=_result(answer.top_match) if answer.top_match else None,
        threshold_used=answer.threshold,
        offset=answer.offset,
        threshold_presets=answer.presets,
        unknown_words=reading.unknown_words(),
        expanded_words=reading.expansions(),
        repeated_words=list(reading.repeated) or None,
        near_misses=[NearMissHit(concept_id=c.concept_id, label=c.label, score=c.score)
                     for c in answer.closest] or None,
        near_miss_threshold=answer.closest_threshold,
        ontology_filter=None if ontology is None else "sources",
    )


def _run_search(search: SearchService, body: SearchRequest) -> SearchResponse:
    return _response(search.answer(body.query, body.min_similarity, body.limit, body.offset,
                                   body.ontology, evidence=body.include_evidence),
                     body.ontology)


@router.post("/query/search", response_model=SearchResponse)
async def search(body: SearchRequest, search: Search, _user: User) -> Response:
    """The response is serialised once, here, from the model built in ``_run_search``
    (returning the model would make FastAPI dump, validate and dump it again)."""
    response = await anyio.to_thread.run_sync(_run_search, search, body)
    sent = "omitted" if body.min_similarity is None else body.min_similarity
    request_log.info("search min_similarity=%s threshold_used=%s count=%d query=%s",
                     sent, response.threshold_used, response.count, shown(body.query))
    return Response(response.model_dump_json(), media_type="application/json")


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
        instances=[ConceptInstance(**i) for i in reads.instances(store, concept_id)],
        relationships=relationships,
        provenance=ConceptProvenance(documents=provenance_docs),
        signature=row["signature"] or None,
    )


@router.get("/query/concept/{concept_id}", response_model=ConceptDetailsResponse)
def concept_details(concept_id: str, store: Storage, _user: User
                    ) -> ConceptDetailsResponse:
    return _concept_details(store, concept_id)
