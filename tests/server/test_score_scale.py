"""Nothing in the search is tuned to one model's cosines (ADR-508): a model that squeezes
its cosines into [0.7, 1], as e5 and nomic do, lists what all-MiniLM-L6-v2 lists, because
its scores are mapped onto the reference scale before any tuned number applies.

The squeezed model is all-MiniLM-L6-v2 with one constant dimension added: its cosines are
exactly ``0.3 * cosine + 0.7``, so after the scale its search must agree with the real
one, and without the scale every query, gibberish too, would list everything."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.startup import reembed
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model import pairs, record
from tests.helpers.store import copy_store

SQUEEZE = 0.3  # the squeezed model's cosine = SQUEEZE * cosine + (1 - SQUEEZE)
QUERIES = ["compress data with gzip", "read a zip archive", "parse json text",
           "sort a list", "current date and time"]
#: nonsense of every kind: the reading sets the first aside as noise, the rest are real
#: words that mean nothing together, which only the default keeps out
GIBBERISH = ["qwzx vbnmk plorf", "tuesday window theory", "orbit pickle democracy",
             "purple elephant keyboard"]


class SqueezedEmbedder:
    """The real model's vectors with a constant dimension appended (unit length kept)."""

    def __init__(self, real: Embedder) -> None:
        self.real = real
        self.spec = dataclasses.replace(real.spec, name="squeezed-minilm",
                                        dimensions=real.dimensions + 1, digest="squeezed")
        self.name = self.spec.name
        self.dimensions = self.spec.dimensions

    def _squeeze(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.atleast_2d(vectors)
        extra = np.full((len(vectors), 1), np.sqrt(1 - SQUEEZE), np.float32)
        return np.hstack([vectors * np.float32(np.sqrt(SQUEEZE)), extra]).astype(np.float32)

    def load(self) -> None:
        self.real.load()

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        return self._squeeze(self.real.encode(texts, progress=progress)) if texts else \
            np.zeros((0, self.dimensions), np.float32)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._squeeze(self.real.encode_queries(texts)) if texts else \
            np.zeros((0, self.dimensions), np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        return self._squeeze(self.real.encode_one(text))[0]


@pytest.fixture(scope="module")
def real_embedder() -> Embedder:
    model = Embedder()
    model.load()
    return model


def test_the_reference_model_maps_to_itself_exactly(real_embedder: Embedder) -> None:
    measured = pairs.measure(real_embedder.encode_queries, real_embedder.encode).scale
    assert measured.identity, measured  # today's model scores exactly as before
    assert (measured.unrelated, measured.related) == pytest.approx(
        (pairs.UNRELATED_REF, pairs.RELATED_REF), abs=1e-4)


def test_a_squeezed_model_is_stretched_back(real_embedder: Embedder) -> None:
    squeezed = SqueezedEmbedder(real_embedder)
    measured = pairs.measure(squeezed.encode_queries, squeezed.encode).scale
    assert measured.gain == pytest.approx(1 / SQUEEZE, abs=0.01)
    assert measured.offset == pytest.approx(-(1 - SQUEEZE) / SQUEEZE, abs=0.01)


def test_a_squeezed_model_lists_what_the_reference_lists(
        small_store: Path, tmp_path: Path, real_embedder: Embedder) -> None:
    """End to end: the store re-embedded by the squeezed model, its scale measured and its
    default calibrated, lists the same as the reference store at each one's default."""
    def listings(graph: KnowledgeGraph, queries: list[str]) -> list[list[str]]:
        default = graph.default_threshold()
        return [[cid for cid, _ in graph.searcher.search(q, default, 50, 0, None).page]
                for q in queries]

    reference = KnowledgeGraph(Store(copy_store(small_store, tmp_path / "ref.sqlite3")),
                               real_embedder)
    reference.reload_index()
    db = copy_store(small_store, tmp_path / "kg.sqlite3")
    reembed.reembed(db, SqueezedEmbedder(real_embedder), server_running=False,
                    progress=False)
    squeezed = KnowledgeGraph(Store(db), SqueezedEmbedder(real_embedder))
    squeezed.reload_index()
    assert not squeezed.model.scale.identity
    assert squeezed.default_threshold() == pytest.approx(reference.default_threshold(),
                                                         abs=0.02)
    assert listings(squeezed, GIBBERISH) == [[]] * len(GIBBERISH)
    ours, theirs = listings(squeezed, QUERIES), listings(reference, QUERIES)
    for got, want in zip(ours, theirs, strict=True):
        assert want, "the reference lists something for each query"
        assert got[:3] == want[:3]
        assert len(set(got) ^ set(want)) <= 2  # a result at the boundary may differ

    # without the scale (a record that keeps no measurement, opened again without
    # measuring), the squeezed model's cosines all sit far above the default: nonsense
    # in real words lists, and every query lists its whole page
    held = squeezed.model.record
    record.write(squeezed.store, dataclasses.replace(held, measured=None))
    squeezed = KnowledgeGraph(squeezed.store, SqueezedEmbedder(real_embedder))
    squeezed.reload_index()
    assert squeezed.model.scale.identity
    assert any(listings(squeezed, GIBBERISH))
    assert all(len(found) == 50 for found in listings(squeezed, QUERIES))
