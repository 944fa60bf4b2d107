"""The search's one state object: the index, the corpus's vocabulary and the lexicon,
and what is done with them (read a query, score it, search, the near-miss hint).

Methods are blocking; routes call them through worker threads. The index and the
vocabulary are swapped in as new references when content changes (the knowledge graph
decides when: :class:`kg_fuse.server.knowledge.graph.KnowledgeGraph`), so a search that took
them once never sees them half-updated, and every cache keyed by them empties itself.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kg_fuse.server.search import keywords, tuning
from kg_fuse.server.search.generations import GenerationCache
from kg_fuse.server.search.index import (
    ABOVE_ZERO,
    ConceptIndex,
    KeywordRows,
    load_fused,
    memberships,
)
from kg_fuse.server.search.lexicon import wordnet
from kg_fuse.server.search.parts import ScoreParts, score_parts
from kg_fuse.server.search.understand import QueryReading, read_query
from kg_fuse.server.search.words import Vocabulary, text_words
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model.owner import StoreModel

log = logging.getLogger(__name__)

#: Query texts whose vector and keyword rows are kept (about 3 KiB each at 384 dims).
PREPARED_QUERIES = 1024


@dataclass
class NearMiss:
    """The near-miss hint of a search that came back short."""

    count: int
    suggested: float
    top_id: str
    top_score: float


class PreparedQuery(NamedTuple):
    """What a search needs of its query text (:meth:`Searcher.prepared`)."""

    vector: np.ndarray
    keyword: KeywordRows


@dataclass
class SearchOutcome:
    threshold: float
    page: list[tuple[str, float]]
    near_miss: NearMiss | None
    #: the closest concepts below the threshold when the page came back short (ours)
    closest: list[tuple[str, float]] = field(default_factory=list)
    #: why each page result matched: its score's parts and the words that counted (ours)
    parts: dict[str, ScoreParts] = field(default_factory=dict)

    @property
    def closest_threshold(self) -> float | None:
        """A threshold that lists the best of :attr:`closest` (:func:`just_below`)."""
        return just_below(self.closest[0][1]) if self.closest else None


class Searcher:
    """Index, vocabulary and lexicon, with reading, scoring and searching over them."""

    def __init__(self, store: Store, model: StoreModel) -> None:
        self.store = store  # keyword lookups (FTS5) and the index's stored vectors
        #: the store's model: it embeds the queries (its prompts applied) and owns the
        #: scale their cosines are mapped by (asked at each search: measured once)
        self.model = model
        #: the tuned values this model moves from the table's (its row of BY_MODEL)
        self.tuning = tuning.for_model(model.name)
        self.index = ConceptIndex()
        self.vocabulary = Vocabulary()
        self.lexicon = wordnet()
        self._term_cache: tuple[ConceptIndex | None, keywords.TermCache] = (
            None, keywords.TermCache())
        self._prepared: GenerationCache[str, PreparedQuery] = GenerationCache(
            PREPARED_QUERIES)
        self._readings: GenerationCache[str, QueryReading] = GenerationCache(
            PREPARED_QUERIES)

    # -- reading and scoring a query ---------------------------------------------------

    def read(self, query: str) -> QueryReading:
        """The query's words read against this corpus (:mod:`.understand`), cached per
        vocabulary: a search reads its query twice (to score it, and to say which words
        were unknown), and WordNet look-ups are most of a new query's Python time."""
        vocabulary = self.vocabulary
        found = self._readings.get((vocabulary,), query)
        if found is None:
            found = read_query(query, vocabulary, self.lexicon)
            self._readings.put((vocabulary,), query, found)
        return found

    def scored_query(self, reading: QueryReading, vector: np.ndarray, index: ConceptIndex,
                     match: keywords.KeywordMatch | None = None
                     ) -> tuple[np.ndarray, KeywordRows]:
        """The query vector and its keyword rows: the two halves of the final score.

        Each concept's vector score is scaled by how familiar the query's words are
        there (:meth:`QueryReading.familiarity`): the vector carries the best case, the
        keyword rows each concept's own share of it and ``rest`` everyone else's. A
        query of noise (familiarity 0 even at its best) has neither: no keyword lookups.
        ``match``: the keyword scores if already looked up.
        """
        best = reading.familiarity(None)
        if best <= 0:
            return vector * np.float32(0.0), index.keyword_rows({}, weight=0.0)
        if match is None:
            match = self.keyword_scores(reading, index)
        factors = {cid: reading.familiarity(at) / best for cid, at in match.bridged.items()}
        rest = reading.familiarity({}) / best
        return vector * np.float32(best), index.keyword_rows(
            match.scores, factors, rest, weight=best, lift=self.tuning.keyword_weight)

    def keyword_scores(self, reading: QueryReading, index: ConceptIndex
                       ) -> keywords.KeywordMatch:
        """The query's keyword scores (FTS5), looked up under the store's lock.

        Term lookups are cached per index generation: every change of the indexed text
        also swaps the index, which drops the cache.
        """
        return keywords.keyword_scores(self.store, reading, len(index),
                                       cache=self._terms(index))

    def _terms(self, index: ConceptIndex) -> keywords.TermCache:
        """The term lookups cached for ``index``'s generation."""
        owner, cache = self._term_cache
        if owner is not index:
            cache = keywords.TermCache()
            self._term_cache = (index, cache)
        return cache

    def prepared(self, query: str) -> PreparedQuery:
        """The query's vector (familiarity applied) and keyword rows, cached per index
        generation: a mount repeats the same few queries at every refresh, and the
        embedding is most of a search's cost."""
        index = self.index
        generation = (index, self.vocabulary)
        found = self._prepared.get(generation, query)
        if found is None:
            reading = self.read(query)
            if reading.familiarity(None) <= 0:  # noise: its vector counts for 0, unembedded
                found = PreparedQuery(np.zeros(self.model.embedder.dimensions, np.float32),
                                      index.keyword_rows({}, weight=0.0))
            else:
                # keywords first: searches queued for the model's next run look theirs up
                # while it runs (it releases the GIL), not one after another after it
                match = self.keyword_scores(reading, index)
                vector = self.model.embedder.encode_one(reading.embedded_text(query))
                found = PreparedQuery(*self.scored_query(reading, vector, index, match))
            self._prepared.put(generation, query, found)
        return found

    # -- searching ---------------------------------------------------------------------

    def search(self, query: str, threshold: float, limit: int, offset: int,
               ontology: str | None) -> SearchOutcome:
        """Hybrid score, filter, page, then the near-miss hint (blocking)."""
        index, scale = self.index, self.model.scale
        vector, keyword = self.prepared(query)
        page = index.search(vector, threshold, ontology=ontology, top_k=offset + limit,
                            keyword=keyword, scale=scale)[offset:]
        short = len(page) < tuning.NEAR_MISS_SHORT.value
        closest: list[tuple[str, float]] = []
        if short and offset == 0 and threshold > 0:
            named = tuning.CLOSEST.value
            closest = [(cid, s) for cid, s in index.search(
                vector, 1e-6, ontology=ontology, top_k=len(page) + named,
                keyword=keyword, scale=scale) if s < threshold][:named]
        near_miss = None
        floor = tuning.NEAR_MISS_FLOOR.value
        if short and threshold > floor:
            near_miss = _near_miss(index.search(
                vector, floor, ontology=ontology, top_k=tuning.NEAR_MISS_DEPTH.value * limit,
                keyword=keyword, scale=scale), threshold)
        parts = score_parts(self.store, index, self.read(query), vector, keyword,
                            scale, page, cache=self._terms(index))
        return SearchOutcome(threshold=threshold, page=page, near_miss=near_miss,
                             closest=closest, parts=parts)

    def search_many(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        """Each query's top ``k`` final scores above 0 (calibration: one embedding batch).

        A query the reading finds to be noise scores 0 everywhere: it is neither
        embedded nor scanned, and finds nothing. The scan ranks only the best ``k``
        above 0 (a score of 0 is no match: ranking every concept would be most of a
        calibration's time)."""
        index, scale = self.index, self.model.scale
        readings = [self.read(q) for q in queries]
        live = [i for i, reading in enumerate(readings) if reading.familiarity(None) > 0]
        vectors = self.model.embedder.encode_queries(
            [readings[i].embedded_text(queries[i]) for i in live]) if live else []
        found: list[list[tuple[str, float]]] = [[] for _ in queries]
        for i, raw in zip(live, vectors, strict=True):
            vector, keyword = self.scored_query(readings[i], raw, index)
            found[i] = index.search(vector, ABOVE_ZERO, top_k=k, keyword=keyword,
                                    scale=scale)
        return found

    # -- the index's changes (the knowledge graph decides when) -------------------------

    def reload(self) -> None:
        """The index and vocabulary read afresh from the store."""
        self.index = ConceptIndex.load(self.store)
        self.vocabulary = keywords.load_vocabulary(self.store)

    def add(self, concept_ids: list[str], touched: Iterable[str] = (),
            texts: Iterable[str] = ()) -> None:
        """Fuse the new concepts' stored views into a new index and swap it in; the
        ``touched`` concepts (evidence added or removed) get their ontologies again.
        ``texts``: the new concepts' keyword-indexed text (their words join the
        vocabulary)."""
        regrouped = [c for c in touched if c in self.index.row_of]
        if concept_ids or regrouped:
            self.index = self.index.changed(
                added=load_fused(self.store, concept_ids),
                members=memberships(self.store, list(concept_ids) + regrouped))
        if concept_ids:
            names = keywords.load_names(self.store)
            self.vocabulary = self.vocabulary.with_words(text_words(texts)).with_names(names)

    def remove(self, gone: set[str], regrouped: Iterable[str] = (),
               dropped_ontology: str | None = None) -> None:
        """Swap in an index without the ``gone`` concepts; the ``regrouped`` ones get
        their ontologies again, and ``dropped_ontology`` loses every member."""
        members: Mapping[str, frozenset[str]] | None = None
        regrouped = [c for c in regrouped if c not in gone]
        if regrouped:
            members = memberships(self.store, regrouped)
        self.index = self.index.changed(removed=gone, members=members,
                                        dropped_ontology=dropped_ontology)


def _near_miss(hits: list[tuple[str, float]], threshold: float) -> NearMiss | None:
    """The contract's hint from the hits down to the near-miss floor: how many fell
    below the threshold, a threshold that lists them all, and the best of them."""
    below = [(cid, s) for cid, s in hits if s < threshold]
    if not below:
        return None
    suggested = round(min(s for _, s in below) - tuning.NEAR_MISS_STEP.value, 2)
    return NearMiss(count=len(below), suggested=suggested, top_id=below[0][0],
                    top_score=below[0][1])


def just_below(score: float) -> float:
    """A threshold (two decimals) that lists a concept of this score: its score rounded
    down, so writing it to ``.meta/threshold`` shows the best near miss and those close
    to it, not everything down to the noise floor."""
    return max(0.0, math.floor(score * 100 + 1e-9) / 100)
