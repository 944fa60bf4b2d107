"""Adding and removing content, with the search told what changed.

One change at a time (:attr:`ContentChanges.lock`): the store's rows, then the index
swapped in as one reference (built from the old one with rows added or removed, never
reloaded from SQLite, see :mod:`kg_fuse.server.search.index`), then the catalog. Each
change may move the calibrated default (:meth:`DefaultThreshold.recalibrate_if_drifted`).
Methods here are blocking; routes and jobs call them through worker threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kg_fuse.server.corpus import DocumentSpec
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge import duplicates, indexing
from kg_fuse.server.search.searcher import Searcher
from kg_fuse.server.storage import reads, search_rows, writes
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold.default import DefaultThreshold


@dataclass
class IngestOutcome:
    """What adding documents did: concepts created, near-duplicate warnings."""

    concepts_created: int
    near_duplicates: list[dict]


class ContentChanges:
    """Documents and ontologies added and removed, the index kept in step."""

    def __init__(self, store: Store, embedder: Embedder, searcher: Searcher,
                 threshold: DefaultThreshold) -> None:
        self.store = store
        self.embedder = embedder
        self.searcher = searcher
        self.threshold = threshold
        self.lock = threading.Lock()  # one change of content at a time

    def _add_to_index(self, concept_ids: list[str], touched: Iterable[str] = ()) -> None:
        """Tell the search about new concepts and those whose evidence changed."""
        self.searcher.add(concept_ids, touched,
                          search_rows.texts_of(self.store, concept_ids) if concept_ids else ())

    def add_documents(self, docs: list[DocumentSpec], progress: bool = False,
                      created_by: str | None = None,
                      checkpoint: Callable[[], None] | None = None) -> IngestOutcome:
        """Store, embed and link new documents, swap in an updated index, then publish.

        The documents reach the catalog (and the epoch moves) only after the index holds
        their concepts: a client that lists a new document finds its concepts too. A
        concept another ontology has (the same file copied) joins this one too.
        ``checkpoint`` is called while embedding and once after: if it raises (the server
        stops), or the embedding fails, the documents are taken out again, whole.
        """
        with self.lock:
            stored = writes.write_documents(self.store, docs, created_by=created_by,
                                             published=False)
            try:
                embedded = indexing.embed_missing(self.store, self.embedder,
                                                  progress=progress, checkpoint=checkpoint)
                if checkpoint is not None:
                    checkpoint()
            except BaseException:
                for document_id in stored:  # unpublished: no client has seen them
                    writes.delete_document(self.store, document_id)
                raise
            before = self.searcher.index
            self._add_to_index(embedded, (c.id for d in stored.values() for c in d.concepts))
            if embedded:
                indexing.link_similar(self.store, self.searcher.index, embedded)
            outcome = IngestOutcome(len(embedded), duplicates.find(
                self.store, before, self.searcher.index, embedded))
            writes.publish_documents(self.store, duplicates.by_document(
                stored, outcome.near_duplicates))
        self.threshold.recalibrate_if_drifted()
        return outcome

    def create_ontology(self, name: str, description: str = "",
                        created_by: str | None = None) -> None:
        """An empty ontology (FileExistsError when the name is taken). It changes no
        index, so it does not wait for a change in progress (an ingest's embedding)."""
        writes.create_ontology(self.store, name, description, created_by=created_by)

    def remove_ontology(self, name: str) -> dict[str, int] | None:
        with self.lock:
            result = writes.delete_ontology(self.store, name)
            if result is not None:
                self.searcher.remove(self._gone(), dropped_ontology=name)
        self.threshold.recalibrate_if_drifted()
        return result

    def remove_document(self, document_id: str) -> dict[str, int] | None:
        """Remove a document; concepts it shared with others leave its ontology unless
        another of its documents still supports them."""
        with self.lock:
            supported = {r["concept_id"] for r in reads.document_concepts(
                self.store, document_id)}
            result = writes.delete_document(self.store, document_id)
            if result is not None:
                self.searcher.remove(self._gone(), regrouped=supported)
        if result is not None:
            self.threshold.recalibrate_if_drifted()
        return result

    def _gone(self) -> set[str]:
        """Indexed concepts the store no longer has."""
        present = reads.concept_ids(self.store)
        return {c for c in self.searcher.index.ids if c not in present}
