"""The knowledge graph the routes talk to: the store, the model and the search, kept in
step.

What it does is coordination: the threshold settings, adding and removing content (and
telling the search, :class:`~kg_fuse.server.search.searcher.Searcher`, what changed),
start-up and calibration. Searching itself is the searcher's. Methods here are blocking;
routes call them through worker threads. The index is swapped in as one reference after
content changes: built from the old one with rows added or removed, never reloaded from
SQLite (see :mod:`kg_fuse.server.search.index`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kg_fuse.server import content, duplicates, repository
from kg_fuse.server.corpus import DocumentSpec
from kg_fuse.server.corpus.markdown import read_folder
from kg_fuse.server.corpus.stdlib import STDLIB_MARKER_KEY, stdlib_docs_to_store
from kg_fuse.server.embedder import Embedder, release_freed_heap
from kg_fuse.server.generations import GenerationCache
from kg_fuse.server.search import calibrate
from kg_fuse.server.search.index import ConceptIndex
from kg_fuse.server.search.presets import derive as derive_presets
from kg_fuse.server.search.searcher import Searcher, SearchOutcome
from kg_fuse.server.search.understand import QueryReading
from kg_fuse.server.store import Store

log = logging.getLogger(__name__)

#: Concept summaries kept for search results (a few hundred bytes each).
SUMMARIES = 8192


@dataclass
class IngestOutcome:
    """What adding documents did: concepts created, near-duplicate warnings."""

    concepts_created: int
    near_duplicates: list[dict]


class KnowledgeGraph:
    """Store, embedder and search, with the operations the HTTP layer needs."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.searcher = Searcher(store, embedder)
        self._summaries: GenerationCache[str, dict] = GenerationCache(SUMMARIES)
        self._write_lock = threading.Lock()
        self._presets: tuple[float, str | None, dict[str, float]] | None = None

    # -- threshold (ADR-508) -----------------------------------------------------------

    def stored_threshold(self) -> float | None:
        """The configured default, or None when unset or unreadable."""
        try:
            raw = self.store.get_setting(calibrate.THRESHOLD_KEY)
            value = None if raw is None else float(raw)
        except (ValueError, TypeError):
            log.warning("unreadable %s setting; using the fallback", calibrate.THRESHOLD_KEY)
            return None
        if value is None or not 0.0 <= value <= 1.0:
            return None
        return value

    def default_threshold(self) -> float:
        stored = self.stored_threshold()
        return calibrate.FALLBACK_THRESHOLD if stored is None else stored

    def set_threshold(self, value: float, provenance: dict | None = None) -> None:
        """Store the default; without ``provenance`` it is an administrator's value."""
        prov = provenance or {"source": "administrator", "set_by": None,
                              "set_at": datetime.now(UTC).isoformat(timespec="seconds")}
        with self.store.transaction() as conn:
            for key, value_text in ((calibrate.THRESHOLD_KEY, repr(float(value))),
                                    (calibrate.PROVENANCE_KEY, json.dumps(prov))):
                conn.execute("INSERT INTO settings(key, value) VALUES (?, ?) ON CONFLICT(key) "
                             "DO UPDATE SET value = excluded.value", (key, value_text))

    def presets(self) -> dict[str, float]:
        """The intensity presets for the current default, from the last calibration."""
        default = self.default_threshold()
        raw = self.store.get_setting(calibrate.CALIBRATION_KEY)
        if self._presets is None or self._presets[:2] != (default, raw):
            try:
                report = None if raw is None else json.loads(raw)
            except ValueError:
                report = None
            self._presets = (default, raw, derive_presets(default, report))
        return dict(self._presets[2])

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
        :func:`repository.concept_summaries`), cached while the content stays the same:
        every change of content moves the epoch."""
        generation = (self.index, self.store.epoch())
        found = self._summaries.get_many(generation, ids)
        missing = [cid for cid in ids if cid not in found]
        if missing:
            fetched = repository.concept_summaries(self.store, missing)
            self._summaries.put_many(generation, fetched)
            found.update(fetched)
        return found

    def search(self, query: str, threshold: float, limit: int, offset: int,
               ontology: str | None) -> SearchOutcome:
        """Hybrid score, filter, page, then the near-miss hint (:meth:`Searcher.search`)."""
        return self.searcher.search(query, threshold, limit, offset, ontology)

    # -- content -----------------------------------------------------------------------

    def reload_index(self) -> None:
        self.searcher.reload()

    def _add_to_index(self, concept_ids: list[str], touched: Iterable[str] = ()) -> None:
        """Tell the search about new concepts and those whose evidence changed."""
        self.searcher.add(concept_ids, touched,
                          content.texts_of(self.store, concept_ids) if concept_ids else ())

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
        with self._write_lock:
            stored = content.write_documents(self.store, docs, created_by=created_by,
                                             published=False)
            try:
                embedded = content.embed_missing(self.store, self.embedder,
                                                 progress=progress, checkpoint=checkpoint)
                if checkpoint is not None:
                    checkpoint()
            except BaseException:
                for document_id in stored:  # unpublished: no client has seen them
                    content.delete_document(self.store, document_id)
                raise
            before = self.index
            self._add_to_index(embedded, (c.id for d in stored.values() for c in d.concepts))
            if embedded:
                content.link_similar(self.store, self.index, embedded)
            outcome = IngestOutcome(len(embedded), duplicates.find(
                self.store, before, self.index, embedded))
            content.publish_documents(self.store, duplicates.by_document(
                stored, outcome.near_duplicates))
        self.recalibrate_if_drifted()
        return outcome

    def remove_ontology(self, name: str) -> dict[str, int] | None:
        with self._write_lock:
            result = content.delete_ontology(self.store, name)
            if result is not None:
                self.searcher.remove(self._gone(), dropped_ontology=name)
        self.recalibrate_if_drifted()
        return result

    def remove_document(self, document_id: str) -> dict[str, int] | None:
        """Remove a document; concepts it shared with others leave its ontology unless
        another of its documents still supports them."""
        with self._write_lock:
            supported = {r["concept_id"] for r in repository.document_concepts(
                self.store, document_id)}
            result = content.delete_document(self.store, document_id)
            if result is not None:
                self.searcher.remove(self._gone(), regrouped=supported)
        if result is not None:
            self.recalibrate_if_drifted()
        return result

    def _gone(self) -> set[str]:
        """Indexed concepts the store no longer has."""
        present = {r[0] for r in self.store.query("SELECT id FROM concepts")}
        return {c for c in self.index.ids if c not in present}

    # -- start-up ----------------------------------------------------------------------

    def prepare(self, corpus: str = "stdlib", modules: list[str] | None = None,
                ingest: list[Path] | None = None, ontology: str | None = None,
                progress: bool = True) -> None:
        """Build whatever the store lacks, load the index, calibrate if needed."""
        docs: list[DocumentSpec] = []
        marker = None
        if corpus == "stdlib":
            marker, stdlib_docs = stdlib_docs_to_store(
                self.store.get_json_setting(STDLIB_MARKER_KEY), modules)
            docs += stdlib_docs
        for folder in ingest or []:
            docs += read_folder(folder, ontology)
        with self._write_lock:
            if dropped := content.delete_unpublished(self.store):
                log.warning("took out %d documents an ingest stopped in its middle left "
                            "unlisted: its job says to upload them again", dropped)
            content.write_documents(self.store, docs)
            if marker is not None:
                self.store.set_setting(STDLIB_MARKER_KEY, json.dumps(marker))
            embedded = content.embed_missing(self.store, self.embedder, progress=progress)
            content.index_missing_text(self.store)
            self.reload_index()
            if embedded:
                log.info("embedded %d new concepts; linking nearest neighbours", len(embedded))
                content.link_similar(self.store, self.index, embedded)
            else:
                log.info("index is up to date: %d concepts, nothing to embed",
                         len(self.index))
        if len(self.index):
            self.recalibrate_if_drifted()
        elif self.stored_threshold() is None:
            log.info("no concepts to calibrate against; the fallback %.2f applies until "
                     "there is content", calibrate.FALLBACK_THRESHOLD)
        release_freed_heap()  # checking the store freed ~30 MiB glibc would keep

    def calibrate(self, write: bool) -> calibrate.CalibrationReport:
        """Measure the noise floor; with ``write`` store the chosen default."""
        concepts = [(r["id"], r["label"], r["description"] or "") for r in self.store.query(
            "SELECT id, label, description FROM concepts ORDER BY id")]
        indexed = set(self.index.ids)
        concepts = [c for c in concepts if c[0] in indexed]
        now = datetime.now(UTC).isoformat(timespec="seconds")
        report = calibrate.measure(self.searcher.search_many, concepts, calibrated_at=now)
        # Outliers by count: their labels are arbitrary text (a concept named
        # "...HeaderError" reads as an error in a log); `kg-fuse calibrate` names them.
        log.info("calibration over %d concepts: noise median %.3f floor %.3f max %.3f, "
                 "%d concepts left out of the floor -> default %.2f", report.concept_count,
                 report.gibberish_median, report.noise_floor, report.gibberish_max,
                 len(report.outliers), report.default)
        if write:
            self.set_threshold(report.default, provenance={
                "source": "calibrated", "concept_count": report.concept_count,
                "calibrated_at": now, "noise_floor": report.noise_floor,
                "noise_median": report.gibberish_median})
            self.store.set_setting(calibrate.CALIBRATION_KEY, report.to_json())
        return report

    def provenance(self) -> dict:
        """Where the default comes from: calibrated (on N concepts at T) or administrator.

        Stores from before provenance was recorded: a default equal to the stored
        calibration report's was calibrated, any other was set by an administrator.
        """
        stored = self.store.get_json_setting(calibrate.PROVENANCE_KEY)
        if isinstance(stored, dict):
            return stored
        value = self.stored_threshold()
        if value is None:
            return {"source": "fallback"}
        report = self.store.get_json_setting(calibrate.CALIBRATION_KEY)
        if isinstance(report, dict) and report.get("default") == value:
            return {"source": "calibrated", "concept_count": report.get("concept_count", 0),
                    "calibrated_at": None, "legacy": True}
        return {"source": "administrator", "set_by": None, "set_at": None}

    def recalibrate_if_drifted(self) -> bool:
        """Recalibrate a calibrated default after the corpus changed by more than
        RECALIBRATE_FRACTION; an administrator's value is never touched."""
        prov = self.provenance()
        if prov.get("source") not in ("calibrated", "fallback") or not len(self.index):
            return False
        legacy = bool(prov.get("legacy"))
        if not legacy and prov.get("source") == "calibrated" and not calibrate.drifted(
                int(prov.get("concept_count") or 0), len(self.index)):
            return False
        log.info("recalibrating: %s", "earlier scoring" if legacy else
                 f"corpus changed from {prov.get('concept_count', 0)} to {len(self.index)} "
                 "concepts")
        self.calibrate(write=True)
        return True
