"""A search request answered: the threshold chosen (the request's, else the default it
inherits), the page scored and summarised, the query's reading, the presets, and what a
short page missed. The route only turns the answer into the contract's body.

Methods are blocking; the route calls them in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from kg_fuse.server.search import lexicon
from kg_fuse.server.search.generations import GenerationCache
from kg_fuse.server.search.parts import ScoreParts
from kg_fuse.server.search.searcher import NearMiss, Searcher
from kg_fuse.server.search.understand import QueryReading
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold.default import DefaultThreshold, ThresholdSource

#: Concept summaries kept for search results (a few hundred bytes each).
SUMMARIES = 8192
#: Instances per result when a search asks for evidence.
SAMPLE_EVIDENCE = 3


@dataclass(frozen=True)
class Hit:
    """A concept found, with its score and what a result shows of it."""

    concept_id: str
    score: float
    summary: dict  # label, description, documents, evidence_count
    evidence: list[dict] | None = None  # its first instances, when the search asked
    why: ScoreParts | None = None  # its score's parts and the words that counted


class NearHit(NamedTuple):
    """One of the closest concepts below the threshold of a short page."""

    concept_id: str
    label: str
    score: float


@dataclass(frozen=True)
class SearchAnswer:
    """Everything a search response says."""

    query: str
    offset: int
    threshold: float
    threshold_source: ThresholdSource
    presets: dict[str, float]
    hits: list[Hit]
    reading: QueryReading
    #: the contract's hint of a short page: how many fell below, a threshold listing
    #: them, and the best of them (``top_match``)
    near_miss: NearMiss | None
    top_match: Hit | None
    #: ours: the closest concepts below the threshold, and a threshold that lists the
    #: best of them
    closest: list[NearHit]
    closest_threshold: float | None


@dataclass(frozen=True)
class IndexStatus:
    """What the search runs on, as the health check reports it."""

    concepts: int
    model: str
    #: the model's grade in words, as measured when the store was built
    model_grade: str
    #: what this server lacks that makes its searches worse, and a weak model's warning
    warnings: list[str]


class SearchService:
    """Answers search requests over the searcher, with the default threshold applied."""

    def __init__(self, store: Store, searcher: Searcher, threshold: DefaultThreshold) -> None:
        self.store = store
        self.searcher = searcher
        self.threshold = threshold
        self._summaries: GenerationCache[str, dict] = GenerationCache(SUMMARIES)

    def answer(self, query: str, min_similarity: float | None, limit: int, offset: int,
               ontology: str | None, evidence: bool = False) -> SearchAnswer:
        """Search at ``min_similarity``, or at the default when it is None
        (:meth:`DefaultThreshold.for_search`)."""
        threshold, source = self.threshold.for_search(min_similarity)
        outcome = self.searcher.search(query, threshold, limit, offset, ontology)
        near = outcome.near_miss
        ids = [cid for cid, _ in outcome.page] + [cid for cid, _ in outcome.closest]
        if near is not None:
            ids.append(near.top_id)
        summaries = self.summaries(ids)

        def hit(cid: str, score: float) -> Hit:
            sample = reads.instances(self.store, cid, SAMPLE_EVIDENCE) if evidence else None
            return Hit(cid, score, summaries[cid], sample, outcome.parts.get(cid))

        return SearchAnswer(
            query=query, offset=offset, threshold=threshold, threshold_source=source,
            hits=[hit(cid, score) for cid, score in outcome.page],
            reading=self.searcher.read(query), near_miss=near,
            top_match=hit(near.top_id, near.top_score) if near else None,
            closest=[NearHit(cid, summaries[cid]["label"], score)
                     for cid, score in outcome.closest],
            closest_threshold=outcome.closest_threshold, presets=self.threshold.presets())

    def summaries(self, ids: list[str]) -> dict[str, dict]:
        """Label, description, ontologies and evidence count of each concept (as
        :func:`reads.concept_summaries`), cached while the content stays the same: every
        change of content moves the epoch."""
        generation = (self.searcher.index, self.store.epoch())
        found = self._summaries.get_many(generation, ids)
        missing = [cid for cid in ids if cid not in found]
        if missing:
            fetched = reads.concept_summaries(self.store, missing)
            self._summaries.put_many(generation, fetched)
            found.update(fetched)
        return found

    def status(self) -> IndexStatus:
        """Concepts indexed, the model and its grade, and warnings: WordNet missing, a
        model that separates related from unrelated text poorly."""
        model = self.searcher.model
        warnings = [] if lexicon.wordnet().available else [lexicon.MISSING]
        if (weak := model.warning()) is not None:
            warnings.append(weak)
        return IndexStatus(concepts=len(self.searcher.index), model=model.name,
                           model_grade=model.record.graded(), warnings=warnings)
