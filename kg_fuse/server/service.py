"""The knowledge graph the routes talk to: store + model + in-memory index.

Methods here are blocking; routes call them through worker threads. The index is
replaced as a whole after content changes (see :mod:`kg_fuse.server.index`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from kg_fuse.server import calibrate, content
from kg_fuse.server.corpus import DocumentSpec
from kg_fuse.server.corpus.markdown import read_folder
from kg_fuse.server.embedder import Embedder
from kg_fuse.server.index import ConceptIndex
from kg_fuse.server.store import Store

log = logging.getLogger(__name__)

STDLIB_MARKER_KEY = "stdlib_corpus"
NEAR_MISS_FLOOR = 0.3


@dataclass
class NearMiss:
    """The near-miss hint of a search that came back short."""

    count: int
    suggested: float
    top_id: str
    top_score: float


@dataclass
class SearchOutcome:
    threshold: float
    page: list[tuple[str, float]]
    near_miss: NearMiss | None


class KnowledgeGraph:
    """Store, embedder and index, with the operations the HTTP layer needs."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self.index = ConceptIndex()
        self._write_lock = threading.Lock()

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

    def set_threshold(self, value: float) -> None:
        self.store.set_setting(calibrate.THRESHOLD_KEY, repr(float(value)))

    # -- search ------------------------------------------------------------------------

    def search(self, query: str, threshold: float, limit: int, offset: int,
               ontology: str | None) -> SearchOutcome:
        """Exact cosine, filter, page, then the near-miss hint (blocking)."""
        vector = self.embedder.encode_one(query)
        index = self.index
        matches = index.search(vector, threshold, ontology=ontology)
        page = matches[offset:offset + limit]
        near_miss = None
        if len(page) < 3 and threshold > NEAR_MISS_FLOOR:
            below = [(cid, s) for cid, s in index.search(vector, NEAR_MISS_FLOOR,
                                                          ontology=ontology, top_k=2 * limit)
                     if s < threshold]
            if below:
                near_miss = NearMiss(count=len(below),
                                     suggested=round(min(s for _, s in below) - 0.02, 2),
                                     top_id=below[0][0], top_score=below[0][1])
        return SearchOutcome(threshold=threshold, page=page, near_miss=near_miss)

    def concept_summaries(self, ids: list[str]) -> dict[str, dict]:
        """Label, description, ontology names and evidence count of each concept."""
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        out: dict[str, dict] = {
            r["id"]: {"label": r["label"], "description": r["description"] or "",
                      "documents": [], "evidence_count": 0}
            for r in self.store.query(
                f"SELECT id, label, description FROM concepts WHERE id IN ({marks})", ids)
        }
        for r in self.store.query(
            f"SELECT concept_id, COUNT(*) AS n FROM instances WHERE concept_id IN ({marks}) "
            "GROUP BY concept_id", ids):
            out[r["concept_id"]]["evidence_count"] = r["n"]
        for cid, names in self.ontologies_of(ids).items():
            out[cid]["documents"] = names
        return out

    def ontologies_of(self, ids: list[str]) -> dict[str, list[str]]:
        marks = ",".join("?" * len(ids))
        names: dict[str, list[str]] = defaultdict(list)
        for r in self.store.query(
            "SELECT DISTINCT i.concept_id, o.name FROM instances i "
            "JOIN chunks c ON c.source_id = i.source_id "
            "JOIN documents d ON d.id = c.document_id "
            f"JOIN ontologies o ON o.id = d.ontology_id WHERE i.concept_id IN ({marks}) "
            "ORDER BY o.name", ids):
            names[r["concept_id"]].append(r["name"])
        return names

    def sample_evidence(self, concept_id: str, limit: int = 3) -> list[dict]:
        return self.instances(concept_id)[:limit]

    def instances(self, concept_id: str) -> list[dict]:
        rows = self.store.query(
            "SELECT i.quote, o.name AS ontology, c.paragraph, c.source_id, c.full_text, "
            "d.content_type, d.filename, d.source_type, d.source_path FROM instances i "
            "JOIN chunks c ON c.source_id = i.source_id "
            "JOIN documents d ON d.id = c.document_id "
            "JOIN ontologies o ON o.id = d.ontology_id WHERE i.concept_id = ? ORDER BY i.id",
            (concept_id,))
        return [{"quote": r["quote"], "document": r["ontology"], "paragraph": r["paragraph"],
                 "source_id": r["source_id"], "full_text": r["full_text"] or "",
                 "content_type": r["content_type"], "has_image": False, "image_uri": None,
                 "storage_key": None, "filename": r["filename"],
                 "source_type": r["source_type"], "source_path": r["source_path"],
                 "source_hostname": None} for r in rows]

    # -- content -----------------------------------------------------------------------

    def reload_index(self) -> None:
        self.index = ConceptIndex.load(self.store)

    def add_documents(self, docs: list[DocumentSpec], progress: bool = False,
                      created_by: str | None = None) -> int:
        """Store, embed and link new documents, then swap in a fresh index."""
        with self._write_lock:
            content.write_documents(self.store, docs, created_by=created_by)
            embedded = content.embed_missing(self.store, self.embedder, progress=progress)
            if embedded:
                self.reload_index()
                content.link_similar(self.store, self.index, embedded)
            return len(embedded)

    def remove_ontology(self, name: str) -> dict[str, int] | None:
        with self._write_lock:
            result = content.delete_ontology(self.store, name)
            if result is not None:
                self.reload_index()
            return result

    def remove_document(self, document_id: str) -> dict[str, int] | None:
        with self._write_lock:
            result = content.delete_document(self.store, document_id)
            if result is not None:
                self.reload_index()
            return result

    # -- start-up ----------------------------------------------------------------------

    def prepare(self, corpus: str = "stdlib", modules: list[str] | None = None,
                ingest: list[Path] | None = None, ontology: str | None = None,
                progress: bool = True) -> None:
        """Build whatever the store lacks, load the index, calibrate if never set."""
        docs: list[DocumentSpec] = []
        marker = None
        if corpus == "stdlib":
            marker, stdlib_docs = self._stdlib_docs(modules)
            docs += stdlib_docs
        for folder in ingest or []:
            docs += read_folder(folder, ontology)
        with self._write_lock:
            content.write_documents(self.store, docs)
            if marker is not None:
                self.store.set_setting(STDLIB_MARKER_KEY, json.dumps(marker))
            embedded = content.embed_missing(self.store, self.embedder, progress=progress)
            self.reload_index()
            if embedded:
                log.info("embedded %d new concepts; linking nearest neighbours", len(embedded))
                content.link_similar(self.store, self.index, embedded)
            else:
                log.info("index is up to date: %d concepts, nothing to embed",
                         len(self.index))
        if self.stored_threshold() is None:
            if len(self.index):
                self.calibrate(write=True)
            else:
                log.info("no concepts to calibrate against; the fallback %.2f applies until "
                         "a start with content", calibrate.FALLBACK_THRESHOLD)

    def _stdlib_docs(self, modules: list[str] | None) -> tuple[dict | None,
                                                               list[DocumentSpec]]:
        """The stdlib documents still to store, and the marker to record once stored."""
        from kg_fuse.server.corpus.stdlib import CORPUS_VERSION, build_stdlib_corpus

        wanted = {"corpus": "stdlib", "modules": sorted(modules) if modules else None,
                  "version": CORPUS_VERSION}
        marker = self.store.get_json_setting(STDLIB_MARKER_KEY)
        if marker == wanted:
            log.info("stdlib corpus already in the store (%s modules)",
                     len(modules) if modules else "all")
            return None, []
        if isinstance(marker, dict) and marker.get("modules") == wanted["modules"]:
            # An older build of the same corpus: documents are keyed by content, so only
            # what the newer builder adds (compiled modules, built-ins) is stored.
            log.info("upgrading the stdlib corpus from version %s to %s",
                     marker.get("version", 1), CORPUS_VERSION)
            return wanted, build_stdlib_corpus(modules)
        if marker is not None:
            log.warning("store holds a stdlib corpus built with modules=%s; keeping it "
                        "(use a fresh --data-dir to change it)", marker.get("modules"))
            return None, []
        log.info("building the stdlib corpus (%s modules)",
                 len(modules) if modules else "all")
        return wanted, build_stdlib_corpus(modules)

    def calibrate(self, write: bool) -> calibrate.CalibrationReport:
        """Measure the noise floor; with ``write`` store the chosen default."""
        labels = {r["id"]: r["label"] for r in self.store.query("SELECT id, label FROM concepts")}
        report = calibrate.measure(self.embedder, self.index, labels)
        log.info("calibration: gibberish median %.3f max %.3f -> default %.2f",
                 report.gibberish_median, report.gibberish_max, report.default)
        if write:
            self.set_threshold(report.default)
            self.store.set_setting(calibrate.CALIBRATION_KEY, report.to_json())
        return report
