"""A model is graded when it is added: how far it puts related from unrelated text, and
where unrelated text lands on the reference scale; a model that separates them too
poorly is warned about, naming the measurement; ``model list`` shows the grade."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from kg_fuse import cli
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.store_model import grade as grades
from kg_fuse.server.store_model.pairs import measure as measure_pairs
from tests.helpers.tiny_models import Tiny, make_tiny

Encode = Callable[[Sequence[str]], np.ndarray]


def grade_of(encode_queries: Encode, encode_documents: Encode) -> grades.Grade:
    return measure_pairs(encode_queries, encode_documents).grade


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return Embedder()


def _noisy(encode: Encode, sd: float, rng: np.random.Generator) -> Encode:
    return lambda texts: encode(texts) + rng.normal(0.0, sd, (len(texts), 384))


def test_the_reference_model_grades_as_documented(minilm: Embedder) -> None:
    grade = grade_of(minilm.encode_queries, minilm.encode)
    assert grade.separation == pytest.approx(7.06, abs=0.02)
    assert grade.noise == pytest.approx(0.263, abs=0.005)
    assert (grade.first, grade.pairs, grade.weak) == (32, 32, False)
    assert grade.warning("all-MiniLM-L6-v2") is None


def test_squeezed_cosines_are_not_marked_down(minilm: Embedder) -> None:
    """A model that squeezes its cosines (MiniLM with a constant dimension added: every
    cosine is 0.3 * cosine + 0.7) ranks as MiniLM does, and grades as it does."""
    def squeezed(encode: Encode) -> Encode:
        def run(texts: Sequence[str]) -> np.ndarray:
            vectors = encode(texts)
            return np.hstack([vectors * np.sqrt(0.3), np.full((len(texts), 1), np.sqrt(0.7))])
        return run

    plain = grade_of(minilm.encode_queries, minilm.encode)
    grade = grade_of(squeezed(minilm.encode_queries), squeezed(minilm.encode))
    assert grade.separation == pytest.approx(plain.separation, abs=0.01)
    assert grade.noise == pytest.approx(plain.noise, abs=0.002)


def test_a_model_that_separates_poorly_is_warned_about(minilm: Embedder) -> None:
    """MiniLM's vectors with noise added: a little passes, more is warned about, the
    warning naming the measurement and the reference's figure."""
    rng = np.random.default_rng(0)
    fair = grade_of(_noisy(minilm.encode_queries, 0.05, rng),
                               _noisy(minilm.encode, 0.05, rng))
    poor = grade_of(_noisy(minilm.encode_queries, 0.08, rng),
                               _noisy(minilm.encode, 0.08, rng))
    assert not fair.weak and fair.noise < grades.NOISY
    assert poor.weak and poor.separation < fair.separation < 7
    warning = poor.warning("noisy")
    assert warning is not None and warning.startswith(
        "model noisy separates related from unrelated text poorly: its unrelated pairs "
        f"reach {poor.noise:.2f} on the reference scale (all-MiniLM-L6-v2: 0.26; warned "
        "above 0.40")


def test_model_add_grades_and_model_list_shows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A model with random weights cannot separate anything: ``model add`` says so, and
    ``model list`` shows its grade and warns again; a model not graded yet shows '-'
    until ``model list --grade`` measures it."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    folder = tmp_path / "random-mpnet"
    make_tiny(folder, Tiny("MPNetConfig", dict(hidden_size=32, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=32),
                           "wordpiece", "mean", True, 64))
    capsys.readouterr()
    assert cli.main(["model", "add", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert "kg-fuse: graded random-mpnet: separation" in out
    assert "kg-fuse: warning: model random-mpnet separates related from unrelated text " \
           "poorly" in err
    assert cli.main(["model", "list"]) == 0
    out, err = capsys.readouterr()
    rows = {line[2:].split()[0]: line[2:].split() for line in out.splitlines()[1:]}
    assert rows["random-mpnet"][5:7] != ["-", "-"]
    assert float(rows["random-mpnet"][6]) > grades.NOISY
    assert rows["all-MiniLM-L6-v2"][5:7] == ["-", "-"]  # not measured yet: not loaded
    assert "warning: model random-mpnet separates" in err
    assert cli.main(["model", "list", "--grade"]) == 0  # measures the rest, once
    rows = {line[2:].split()[0]: line[2:].split()
            for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["all-MiniLM-L6-v2"][5:7] == ["7.1", "0.26"]
    assert rows["all-MiniLM-L6-v2-int8"][5:7] == ["7.0", "0.26"]
