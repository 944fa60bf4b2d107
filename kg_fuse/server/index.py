"""The in-memory search index: a float32 matrix of unit vectors, exact cosine by numpy.

It is loaded from the store's embeddings table (never recomputed at start-up) and
replaced wholesale after content changes: building a new index object and swapping a
reference is atomic for readers, so searches never see a half-updated matrix.
Ontology membership is by sources: a concept is in ontology O when any of its evidence
comes from a document of O.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from kg_fuse.server.embedder import DIMENSIONS
from kg_fuse.server.scan import QuantisedScan
from kg_fuse.server.store import Store

log = logging.getLogger(__name__)


@dataclass
class ConceptIndex:
    """Concept ids, their matrix rows and per-ontology row sets."""

    ids: list[str] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, DIMENSIONS), np.float32))
    ontology_rows: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def load(cls, store: Store) -> ConceptIndex:
        """Read every stored embedding into one matrix (blocking; call in a thread)."""
        rows = store.query("SELECT concept_id, vector FROM embeddings ORDER BY concept_id")
        ids = [r["concept_id"] for r in rows]
        if rows:
            matrix = np.vstack([np.frombuffer(r["vector"], dtype=np.float32) for r in rows])
        else:
            matrix = np.zeros((0, DIMENSIONS), np.float32)
        row_of = {cid: i for i, cid in enumerate(ids)}
        members: dict[str, list[int]] = defaultdict(list)
        for r in store.query(
            "SELECT DISTINCT i.concept_id, o.name FROM instances i "
            "JOIN chunks c ON c.source_id = i.source_id "
            "JOIN documents d ON d.id = c.document_id "
            "JOIN ontologies o ON o.id = d.ontology_id"
        ):
            row = row_of.get(r["concept_id"])
            if row is not None:
                members[r["name"]].append(row)
        ontology_rows = {name: np.array(sorted(rs), dtype=np.int64)
                         for name, rs in members.items()}
        log.info("loaded %d embeddings from the store into the search index", len(ids))
        index = cls(ids=ids, matrix=np.ascontiguousarray(matrix), ontology_rows=ontology_rows)
        index._scan()  # quantise now, not on the first search
        return index

    def search(self, vector: np.ndarray, threshold: float, ontology: str | None = None,
               top_k: int | None = None) -> list[tuple[str, float]]:
        """Concepts with cosine >= threshold, best first (ties by id order)."""
        if not self.ids:
            return []
        rows = None
        if ontology is not None:
            rows = self.ontology_rows.get(ontology)
            if rows is None or rows.size == 0:
                return []
        positions, scores = self._scan().above(vector, threshold, rows=rows)
        order = np.lexsort((positions, -scores))
        if top_k is not None:
            order = order[:top_k]
        return [(self.ids[int(positions[i])], float(scores[i])) for i in order]

    def _scan(self) -> QuantisedScan:
        """The quantised scan of the current matrix (built once per matrix)."""
        scan = self.__dict__.get("_quantised")
        if scan is None or scan.matrix is not self.matrix:
            scan = QuantisedScan(self.matrix)
            self.matrix = scan.matrix
            self.__dict__["_quantised"] = scan
        return scan

    def best_scores(self, vectors: np.ndarray) -> np.ndarray:
        """Each query vector's best cosine against the whole corpus (calibration)."""
        if not self.ids:
            return np.zeros(len(vectors), np.float32)
        return (vectors @ self.matrix.T).max(axis=1)

    def nearest_neighbours(self, row_ids: list[str], k: int) -> dict[str, list[tuple[str,
                                                                                    float]]]:
        """The k most similar other concepts of each given concept, blockwise."""
        row_of = {cid: i for i, cid in enumerate(self.ids)}
        wanted = [row_of[c] for c in row_ids if c in row_of]
        result: dict[str, list[tuple[str, float]]] = {}
        k = min(k, len(self.ids) - 1)
        if k <= 0:
            return result
        for start in range(0, len(wanted), 1024):
            block = wanted[start:start + 1024]
            sims = self.matrix[block] @ self.matrix.T
            sims[np.arange(len(block)), block] = -np.inf
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            for i, row in enumerate(block):
                cand = top[i][np.argsort(-sims[i, top[i]])]
                result[self.ids[row]] = [(self.ids[int(c)], float(sims[i, c])) for c in cand]
        return result
