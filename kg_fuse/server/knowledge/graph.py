"""The knowledge graph: the server's parts made over one store and one model, and kept in
step.

The model is the store's (:class:`~kg_fuse.server.store_model.owner.StoreModel`: its
record, prompts, score scale and grade), made here over the store and the embedder, which
it checks against the store's record. Searching is the searcher's
(:class:`~kg_fuse.server.search.searcher.Searcher`), a search request answered
:attr:`KnowledgeGraph.search`'s (:mod:`.search_service`), the default threshold and its
calibration :attr:`KnowledgeGraph.threshold`'s (:mod:`kg_fuse.server.threshold.default`),
adding and removing content :attr:`KnowledgeGraph.changes`' (:mod:`.changes`). Start-up
(:mod:`kg_fuse.server.startup`) and the command line work with the parts; the app's
composition root hands each to the routes as a dependency of its own, so no route
reaches through the graph. Methods here are blocking.
"""

from __future__ import annotations

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge.changes import ContentChanges
from kg_fuse.server.knowledge.search_service import SearchService
from kg_fuse.server.search.index import ConceptIndex
from kg_fuse.server.search.searcher import Searcher
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model.owner import StoreModel
from kg_fuse.server.threshold.default import DefaultThreshold


class KnowledgeGraph:
    """Store, model, search, the default threshold and content changes, made together."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.model = StoreModel(store, embedder)  # refuses a store another model embedded
        self.searcher = Searcher(store, self.model)
        self.threshold = DefaultThreshold(store, self.searcher)
        self.changes = ContentChanges(store, embedder, self.searcher, self.threshold)
        self.search = SearchService(store, self.searcher, self.threshold)

    @property
    def embedder(self) -> Embedder:
        return self.model.embedder

    def default_threshold(self) -> float:
        """The default search threshold in force (:meth:`DefaultThreshold.default`)."""
        return self.threshold.default()

    @property
    def index(self) -> ConceptIndex:
        """The search index in force (replaced, never changed, when content changes)."""
        return self.searcher.index

    def reload_index(self) -> None:
        """The index and vocabulary read afresh from the store."""
        self.searcher.reload()
