"""A model's row of the tuning table (``BY_MODEL``) moves that model's search, and only
its own: all-MiniLM-L6-v2, which the table was measured with, has no row."""

from __future__ import annotations

from pathlib import Path

import pytest

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.models import DEFAULT_MODEL
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.search import tuning
from kg_fuse.server.storage.store import Store
from tests.helpers.store import copy_store

#: corpus words only: the keyword index matches them at the results
KEYWORDS = "pack files"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    model = Embedder()
    model.load()
    return model


def _graph(small_store: Path, tmp_path: Path, embedder: Embedder) -> KnowledgeGraph:
    graph = KnowledgeGraph(Store(copy_store(small_store, tmp_path / "kg.sqlite3")), embedder)
    graph.reload_index()
    return graph


def _lifted(graph: KnowledgeGraph) -> dict[str, tuple[float, float]]:
    """Each result of KEYWORDS: (its score, what the keyword match added to it)."""
    outcome = graph.searcher.search(KEYWORDS, 0.1, 20, 0, None)
    assert outcome.page
    return {cid: (score, outcome.parts[cid].words) for cid, score in outcome.page}


def _with_rows(monkeypatch: pytest.MonkeyPatch, rows: dict[str, dict[str, float]]) -> None:
    monkeypatch.setattr(tuning, "BY_MODEL", tuning.Tuned(rows, "test", "test"))


def test_the_reference_model_has_no_row() -> None:
    assert DEFAULT_MODEL not in tuning.BY_MODEL.value
    assert tuning.for_model(DEFAULT_MODEL) == tuning.ModelTuning(tuning.KEYWORD_WEIGHT.value)


def test_every_row_moves_only_what_a_model_may_move() -> None:
    for name, moved in tuning.BY_MODEL.value.items():
        assert moved and set(moved) <= set(tuning.PER_MODEL), name
        assert tuning.for_model(name) != tuning.for_model(DEFAULT_MODEL), name


def test_a_row_moves_that_models_keyword_lift_and_no_other_models(
        small_store: Path, tmp_path: Path, embedder: Embedder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    table = _lifted(_graph(small_store, tmp_path / "table", embedder))
    assert any(words > 0.01 for _, words in table.values())

    _with_rows(monkeypatch, {"another-model": {"KEYWORD_WEIGHT": 0.0}})
    assert _lifted(_graph(small_store, tmp_path / "other", embedder)) == table

    _with_rows(monkeypatch, {DEFAULT_MODEL: {"KEYWORD_WEIGHT": 0.0}})
    unlifted = _lifted(_graph(small_store, tmp_path / "unlifted", embedder))
    assert all(words == pytest.approx(0.0, abs=1e-6) for _, words in unlifted.values())
    # each result common to both scores its vector part alone: the table's score less
    # what the words added there
    for cid in set(unlifted) & set(table):
        score, words = table[cid]
        assert unlifted[cid][0] == pytest.approx(score - words, abs=1e-5), cid

    _with_rows(monkeypatch, {DEFAULT_MODEL: {"KEYWORD_WEIGHT": 0.6}})
    doubled = _lifted(_graph(small_store, tmp_path / "doubled", embedder))
    for cid in set(doubled) & set(table):
        score, words = table[cid]
        if words > 0.01:  # twice the lift: v + 2 * (0.3 * kw * (1 - v))
            assert doubled[cid][0] == pytest.approx(score + words, abs=1e-5), cid
