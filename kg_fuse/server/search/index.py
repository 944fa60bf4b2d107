"""The in-memory search index: one float32 matrix of fused concept vectors, exact by numpy.

Each row is a concept's fused vector (see :mod:`kg_fuse.server.search.views`), so a query's
vector score is one scan of one matrix (the quantised scan of :mod:`kg_fuse.server.search.scan`,
exact at the threshold). Hybrid search adds the keyword score
(:mod:`kg_fuse.server.search.keywords`) with :func:`merge`, which keeps the score in [0, 1].

The index is built from the store's per-view vectors at start-up (never re-embedded)
and then changed incrementally: :meth:`ConceptIndex.changed` returns a new index with
rows added and removed, and the knowledge graph swaps its reference to it. Swapping a
reference is atomic for readers, so a search never sees a half-updated index.
Ontology membership is by sources: a concept is in ontology O when any of its evidence
comes from a document of O.
"""

from __future__ import annotations

import copy
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple

import numpy as np

from kg_fuse.server.search import tuning
from kg_fuse.server.search.scan import QuantisedScan, exact_scores
from kg_fuse.server.search.views import fuse
from kg_fuse.server.storage import search_rows
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model.scale import IDENTITY, ScoreScale

log = logging.getLogger(__name__)

#: How much a full keyword match can add: merged = v + KEYWORD_WEIGHT * kw * (1 - v).
KEYWORD_WEIGHT = tuning.KEYWORD_WEIGHT.value
#: The least score that matches. Scores clip below at 0, so a score of 0 says the concept
#: has nothing in common with the query (a cosine of 0 or less, no keyword): no match at
#: any threshold, 0 included (nonsense lists nothing, even at 0).
ABOVE_ZERO = float(np.nextafter(np.float32(0.0), np.float32(1.0)))


def merge(vector_score: np.ndarray | float, keyword_score: np.ndarray | float,
          weight: float = KEYWORD_WEIGHT) -> np.ndarray:
    """Hybrid score in [0, 1]: the vector score, lifted toward 1 by the keyword score.

    A keyword match can only raise a score, by at most ``weight`` of the distance left
    to 1, so keyword scores can never drown the vector scores and a result without a
    keyword match keeps its vector score.
    """
    v = np.clip(np.asarray(vector_score, dtype=np.float32), 0.0, 1.0)
    k = np.clip(np.asarray(keyword_score, dtype=np.float32), 0.0, 1.0)
    return v + np.float32(weight) * k * (np.float32(1.0) - v)


class KeywordRows(NamedTuple):
    """A query's keyword scores by index row (see :meth:`ConceptIndex.keyword_rows`).

    ``factors`` scale those rows' vector scores and ``rest`` every other row's: how far
    the query's words are the corpus's own at each concept (a word read through WordNet
    counts only where its bridge occurs, see :mod:`kg_fuse.server.search.understand`).
    """

    rows: np.ndarray
    values: np.ndarray
    factors: np.ndarray | None = None
    rest: float = 1.0
    #: the familiarity the query vector already carries (the score scale's offset is
    #: scaled by it as the cosine is: :class:`kg_fuse.server.store_model.scale.ScoreScale`)
    weight: float = 1.0
    #: how much a full keyword match lifts a score (:func:`merge`): the model's own
    #: (:func:`kg_fuse.server.search.tuning.for_model`)
    lift: float = KEYWORD_WEIGHT


def _empty() -> np.ndarray:
    """No rows, and no width yet: the first rows added give it (the model's dimensions)."""
    return np.zeros((0, 0), np.float32)


def _ontology_rows(ids: list[str], members: Mapping[str, Iterable[str]]
                   ) -> dict[str, np.ndarray]:
    rows: dict[str, list[int]] = defaultdict(list)
    for row, cid in enumerate(ids):
        for name in members.get(cid, ()):
            rows[name].append(row)
    return {name: np.array(rs, dtype=np.int64) for name, rs in rows.items()}


def memberships(store: Store, ids: list[str] | None = None) -> dict[str, frozenset[str]]:
    """Concept id -> names of the ontologies its evidence comes from."""
    found: dict[str, set[str]] = defaultdict(set)
    for r in search_rows.evidence_ontologies(store, ids):
        found[r["concept_id"]].add(r["name"])
    return {cid: frozenset(names) for cid, names in found.items()}


def load_fused(store: Store, ids: list[str] | None = None) -> dict[str, np.ndarray]:
    """Concept id -> fused vector, from the stored per-view vectors."""
    views: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
    for r in search_rows.view_vectors(store, ids):
        views[r["concept_id"]][r["view"]] = np.frombuffer(r["vector"], dtype=np.float32)
    return {cid: fuse(v) for cid, v in views.items()}


def _members_changed(members: Mapping[str, frozenset[str]], gone: set[str],
                     changed: Mapping[str, frozenset[str]] | None,
                     dropped_ontology: str | None) -> dict[str, frozenset[str]]:
    """Each concept's ontologies after a change: the ``gone`` ones left out, the
    ``changed`` ones anew, ``dropped_ontology`` taken from every concept."""
    new = {c: m for c, m in members.items() if c not in gone}
    new.update(changed or {})
    if dropped_ontology is not None:
        new = {c: m - {dropped_ontology} for c, m in new.items()}
    return new


def _best_of(top_k: int | None, keyword_rows: np.ndarray, floor: float, rest: float,
             ceiling: Callable[[float], float]) -> tuple[int, float] | None:
    """What :meth:`ConceptIndex.search` needs of the vector scan when it ranks only the
    best ``top_k``: the best ``top_k`` plain rows, so the best ``top_k`` plus as many as
    have keyword scores (those are scored apart), and every row whose score clips to 1
    (ties, which go by id). Below a score of 0 all tie too, so only above a floor."""
    if top_k is None or floor <= 0 or rest < 1e-6:
        return None
    return top_k + len(keyword_rows), ceiling((1.0 - 1e-6) / float(np.float32(rest)))


@dataclass(frozen=True)
class ConceptIndex:
    """Concept ids, their fused-vector rows, and per-ontology row sets (immutable)."""

    ids: list[str] = field(default_factory=list)
    matrix: np.ndarray = field(default_factory=_empty)
    members: dict[str, frozenset[str]] = field(default_factory=dict)
    ontology_rows: dict[str, np.ndarray] = field(default_factory=dict)
    row_of: dict[str, int] = field(default_factory=dict)
    scanner: QuantisedScan = field(default_factory=lambda: QuantisedScan(_empty()))

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def build(cls, vectors: Mapping[str, np.ndarray],
              members: Mapping[str, frozenset[str]]) -> ConceptIndex:
        ids = sorted(vectors)
        matrix = np.vstack([vectors[c] for c in ids]).astype(np.float32) if ids else _empty()
        kept = {c: members[c] for c in ids if c in members}
        scanner = QuantisedScan(matrix)
        return cls(ids=ids, matrix=scanner.matrix, members=kept,
                   ontology_rows=_ontology_rows(ids, kept),
                   row_of={c: i for i, c in enumerate(ids)}, scanner=scanner)

    @classmethod
    def load(cls, store: Store) -> ConceptIndex:
        """Read every stored view vector and fuse them (blocking; call in a thread)."""
        index = cls.build(load_fused(store), memberships(store))
        log.info("loaded %d embeddings from the store into the search index", len(index))
        return index

    def changed(self, added: Mapping[str, np.ndarray] | None = None,
                removed: Iterable[str] = (),
                members: Mapping[str, frozenset[str]] | None = None,
                dropped_ontology: str | None = None) -> ConceptIndex:
        """A new index with rows added/replaced and removed (copy-on-write)."""
        added = dict(added or {})
        gone = set(removed) | set(added)
        ids = [c for c in self.ids if c not in gone] + sorted(added)
        scanner = self._scanner_changed(gone, added)
        new_members = _members_changed(self.members, gone, members, dropped_ontology)
        return ConceptIndex(ids=ids, matrix=scanner.matrix, members=new_members,
                            ontology_rows=_ontology_rows(ids, new_members),
                            row_of={c: i for i, c in enumerate(ids)}, scanner=scanner)

    def _scanner_changed(self, gone: set[str], added: Mapping[str, np.ndarray]
                         ) -> QuantisedScan:
        """A copy of the scanner without the ``gone`` rows, the ``added`` appended in id
        order (its updates rebind arrays: readers of this index keep theirs)."""
        drop = [i for i, c in enumerate(self.ids) if c in gone]
        scanner = copy.copy(self.scanner)
        if drop:
            scanner.delete(drop)
        if added:
            scanner.append(np.vstack([added[c] for c in sorted(added)]))
        return scanner

    def keyword_rows(self, keyword: Mapping[str, float] | None,
                     factors: Mapping[str, float] | None = None, rest: float = 1.0,
                     weight: float = 1.0, lift: float = KEYWORD_WEIGHT) -> KeywordRows:
        """Keyword scores by row (concepts not in the index left out), for :meth:`search`;
        worth keeping when the same keyword scores are searched again. ``factors``
        (default 1) scale those rows' vector scores, ``rest`` the other rows';
        ``weight`` is the familiarity the query vector carries, ``lift`` the keyword
        weight the rows are merged with.

        Each column is one pass of C-level iteration (a search's few hundred matches
        were Python loops under the GIL), then the concepts not in the index dropped."""
        keyword = keyword or {}
        count = len(keyword)
        found = np.fromiter(map(self.row_of.get, keyword, repeat(-1)), np.int64, count)
        inside = found >= 0
        row_factors = None
        if factors is not None:
            row_factors = np.fromiter(map(factors.get, keyword, repeat(rest)), np.float32,
                                      count)[inside]
        return KeywordRows(found[inside],
                           np.fromiter(keyword.values(), np.float32, count)[inside],
                           row_factors, rest, weight, lift)

    def search(self, vector: np.ndarray, threshold: float, ontology: str | None = None,
               top_k: int | None = None,
               keyword: Mapping[str, float] | KeywordRows | None = None,
               scale: ScoreScale = IDENTITY) -> list[tuple[str, float]]:
        """Concepts whose merged score >= threshold, best first (ties by id order); a
        score of 0 is no match, so at threshold 0 only concepts that score at all.

        Vector-only rows come from the quantised threshold scan (``scan.py``, exact);
        rows with a keyword score are scored exactly and merged. With ``top_k`` only the
        best ``top_k`` are ranked (the rest never leave numpy). ``scale`` maps the
        model's products onto the reference model's scores (:mod:`.scale`).
        """
        if not self.ids:
            return []
        threshold = max(threshold, ABOVE_ZERO)
        rows = None
        if ontology is not None:
            rows = self.ontology_rows.get(ontology)
            if rows is None or rows.size == 0:
                return []
        kw = keyword if isinstance(keyword, KeywordRows) else self.keyword_rows(keyword)
        if rows is not None:
            kw = self._within(kw, rows)
        positions, scores = self._scanned(vector, threshold, rows, top_k, kw, scale)
        if kw.rows.size:
            positions, scores = self._with_keywords(vector, threshold, kw, scale, positions,
                                                    scores)
        return self._ranked(positions, scores, threshold, top_k)

    def _within(self, kw: KeywordRows, rows: np.ndarray) -> KeywordRows:
        """The keyword rows among ``rows`` (an ontology's)."""
        if not kw.rows.size:
            return kw
        inside = np.zeros(len(self.ids), bool)
        inside[rows] = True
        keep = inside[kw.rows]
        return kw._replace(rows=kw.rows[keep], values=kw.values[keep],
                           factors=kw.factors[keep] if kw.factors is not None else None)

    def _scanned(self, vector: np.ndarray, threshold: float, rows: np.ndarray | None,
                 top_k: int | None, kw: KeywordRows, scale: ScoreScale
                 ) -> tuple[np.ndarray, np.ndarray]:
        """The rows the vector scan finds at ``threshold`` and their scores, every other
        row's factor (``rest``) applied; none when only rows with evidence can score."""
        if kw.rest <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)

        def product(score: float) -> float:
            return scale.product_at(score, kw.weight)

        positions, vec = self.scanner.above(
            vector, product(threshold / kw.rest), rows=rows,
            top=_best_of(top_k, kw.rows, threshold, kw.rest, product))
        return positions, np.clip(scale.scores(vec, kw.weight) * np.float32(kw.rest), 0.0, 1.0)

    def _with_keywords(self, vector: np.ndarray, threshold: float, kw: KeywordRows,
                       scale: ScoreScale, positions: np.ndarray, scores: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The rows with a keyword score scored exactly and merged, in place of their
        scanned scores."""
        exact = scale.scores(exact_scores(self.matrix[kw.rows], vector), kw.weight)
        if kw.factors is not None:
            exact = exact * kw.factors
        merged = merge(exact, kw.values, kw.lift).astype(np.float64)
        # a keyword row's score: its merged score, or its vector score when that is
        # higher (float32 rounding); below the threshold it is out either way
        vector_part = np.where(exact >= threshold, np.clip(exact, 0.0, 1.0), 0.0)
        kw_scores = np.where(merged >= threshold, np.maximum(merged, vector_part), -1.0)
        plain = np.ones(len(self.ids), bool)
        plain[kw.rows] = False
        plain = plain[positions]
        return (np.concatenate([positions[plain], kw.rows]),
                np.concatenate([scores[plain], kw_scores]))

    def _ranked(self, positions: np.ndarray, scores: np.ndarray, threshold: float,
                top_k: int | None) -> list[tuple[str, float]]:
        """The rows at or above ``threshold``, best first, ties by id; the best ``top_k``."""
        keep = scores >= threshold
        positions, scores = positions[keep], scores[keep]
        if top_k is not None and top_k < len(scores):
            # every row tied with the top_k-th score stays in, so ties still go by id
            kth = np.partition(scores, len(scores) - top_k)[len(scores) - top_k]
            best = scores >= kth
            positions, scores = positions[best], scores[best]
        hits = sorted(zip((-scores).tolist(), [self.ids[r] for r in positions.tolist()],
                          strict=True))
        if top_k is not None:
            hits = hits[:top_k]
        return [(cid, -neg) for neg, cid in hits]

    def unit_rows(self, rows: np.ndarray | list[int] | None = None) -> np.ndarray:
        """Rows scaled to unit length (cosines between concepts)."""
        m = self.matrix if rows is None else self.matrix[rows]
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.maximum(norms, np.float32(1e-12))

    def nearest(self, vectors: np.ndarray, exclude: Iterable[str] = ()
                ) -> list[tuple[str, float]]:
        """For each vector, the most similar concept not in ``exclude`` (cosine)."""
        if not self.ids or not len(vectors):
            return [("", 0.0)] * len(vectors)
        q = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        sims = q.astype(np.float32) @ self.unit_rows().T
        for cid in exclude:
            row = self.row_of.get(cid)
            if row is not None:
                sims[:, row] = -np.inf
        best = sims.argmax(axis=1)
        return [(self.ids[int(b)], float(sims[i, b])) for i, b in enumerate(best)]

    def nearest_neighbours(self, row_ids: list[str], k: int) -> dict[str, list[tuple[str,
                                                                                    float]]]:
        """The k most similar other concepts of each given concept, blockwise (cosine)."""
        wanted = [self.row_of[c] for c in row_ids if c in self.row_of]
        result: dict[str, list[tuple[str, float]]] = {}
        k = min(k, len(self.ids) - 1)
        if k <= 0:
            return result
        unit = self.unit_rows()
        for start in range(0, len(wanted), 1024):
            block = wanted[start:start + 1024]
            sims = unit[block] @ unit.T
            sims[np.arange(len(block)), block] = -np.inf
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            for i, row in enumerate(block):
                cand = top[i][np.argsort(-sims[i, top[i]])]
                result[self.ids[row]] = [(self.ids[int(c)], float(sims[i, c])) for c in cand]
        return result
