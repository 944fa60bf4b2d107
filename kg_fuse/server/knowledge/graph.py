"""The knowledge graph the routes talk to: the store, the model and the search, kept in
step.

A façade: searching is the searcher's (:class:`~kg_fuse.server.search.searcher.Searcher`),
the default threshold and calibration :attr:`KnowledgeGraph.threshold`'s
(:mod:`.default_threshold`), adding and removing content :attr:`KnowledgeGraph.changes`'
(:mod:`.changes`), and start-up :func:`kg_fuse.server.startup.prepare.prepare`'s.
Methods here are blocking; routes call them through worker threads.
"""

from __future__ import annotations

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge.changes import ContentChanges
from kg_fuse.server.search.generations import GenerationCache
from kg_fuse.server.search.index import ConceptIndex
from kg_fuse.server.search.searcher import Searcher, SearchOutcome
from kg_fuse.server.search.understand import QueryReading
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold import score_scale
from kg_fuse.server.threshold.default import DefaultThreshold

#: Concept summaries kept for search results (a few hundred bytes each).
SUMMARIES = 8192


class KnowledgeGraph:
    """Store, embedder and search, with the operations the HTTP layer needs."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.searcher = Searcher(store, embedder)
        self.threshold = DefaultThreshold(store, self.searcher)
        self.changes = ContentChanges(store, embedder, self.searcher, self.threshold)
        self._summaries: GenerationCache[str, dict] = GenerationCache(SUMMARIES)

    def default_threshold(self) -> float:
        """The default search threshold in force (:meth:`DefaultThreshold.default`)."""
        return self.threshold.default()

    # -- search ------------------------------------------------------------------------

    @property
    def index(self) -> ConceptIndex:
        """The search index in force (replaced, never changed, when content changes)."""
        return self.searcher.index

    def read(self, query: str) -> QueryReading:
        """The query's words read against this corpus (:meth:`Searcher.read`)."""
        return self.searcher.read(query)

    def summaries(self, ids: list[str]) -> dict[str, dict]:
        """Label, description, ontologies and evidence count of each concept (as
        :func:`reads.concept_summaries`), cached while the content stays the same:
        every change of content moves the epoch."""
        generation = (self.index, self.store.epoch())
        found = self._summaries.get_many(generation, ids)
        missing = [cid for cid in ids if cid not in found]
        if missing:
            fetched = reads.concept_summaries(self.store, missing)
            self._summaries.put_many(generation, fetched)
            found.update(fetched)
        return found

    def search(self, query: str, threshold: float, limit: int, offset: int,
               ontology: str | None) -> SearchOutcome:
        """Hybrid score, filter, page, then the near-miss hint (:meth:`Searcher.search`)."""
        return self.searcher.search(query, threshold, limit, offset, ontology)

    def reload_index(self) -> None:
        """The index, vocabulary and score scale read afresh from the store."""
        self.searcher.reload()
        self.searcher.scale = score_scale.stored(self.store)
