"""A store's model has one owner (``store_model/``): the store is searched with the model
its record names, that model's prompts and that model's measured scale; a record kg-fuse
never wrote is refused in one line, and the command it names mends the store. The model
is graded when its store is built (``kg-fuse index``, a server's first start, a
re-embedding), the grade is recorded once, and ``server status`` and ``calibrate`` show
it, warning about a model that separates related from unrelated text poorly.

The weak model is an MPNet with random weights (``tests/helpers/tiny_models.py``): it
separates nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from kg_fuse import cli
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.models import DEFAULT_MODEL
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.open_store import open_graph
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model import record
from kg_fuse.server.store_model.owner import ModelMismatch
from tests.helpers.server import KGServer
from tests.helpers.tiny_models import Tiny, make_tiny

WEAK = "random-mpnet"
WARNED = (f"kg-fuse: warning: model {WEAK} separates related from unrelated text poorly: "
          "its unrelated pairs reach ")
NOTES = ("# Bread\n\nKnead the dough and let it rise overnight.\n\n"
         "# Soup\n\nSimmer the vegetables for an hour with salt.\n\n"
         "# Tea\n\nPour boiling water over the leaves and wait three minutes.\n")


@pytest.fixture(scope="module")
def weak_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("weak") / WEAK
    make_tiny(folder, Tiny("MPNetConfig", dict(hidden_size=32, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=32),
                           "wordpiece", "mean", True, 64,
                           prompts={"query": "question: ", "document": "answer: "}))
    return folder


@pytest.fixture()
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Private XDG directories, and a folder of notes."""
    for name in ("DATA", "CACHE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(tmp_path / name.lower()))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "kitchen.md").write_text(NOTES)
    return tmp_path


@pytest.fixture()
def home(dirs: Path, weak_folder: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The private directories, holding the weak model."""
    assert cli.main(["model", "add", str(weak_folder)]) == 0
    capsys.readouterr()
    return dirs


def _index(home: Path, *extra: str) -> int:
    return cli.main(["index", "--corpus", "none", "--ingest", str(home / "notes"), *extra])


def _db(home: Path) -> Path:
    return home / "data" / "kg-fuse" / "server" / "kg.sqlite3"


def test_a_weak_model_is_warned_about_when_its_store_is_built_and_by_calibrate(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _index(home, "--model", WEAK) == 0
    out, err = capsys.readouterr()
    assert f"model {WEAK}: separation " in out
    assert WARNED in err and "a default threshold cannot keep nonsense out" in err
    held = record.read_at(_db(home))
    assert held is not None and held.measured is not None and held.measured.grade.weak

    assert cli.main(["calibrate", "--show"]) == 0
    out, err = capsys.readouterr()
    assert f"model {WEAK}: separation " in out and WARNED in err
    assert cli.main(["calibrate"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Calibration over ") and f"concepts ({WEAK}, fused views" in out
    assert f"model {WEAK}: separation " in out and WARNED in err

    # a store of the reference model gets its grade, and no warning
    assert cli.main(["index", "--corpus", "none", "--ingest", str(home / "notes"),
                     "--data-dir", str(home / "plain")]) == 0
    out, err = capsys.readouterr()
    assert (f"model {DEFAULT_MODEL}: separation 7.1, noise at 0.26 on the reference scale, "
            "32/32 answers first") in out
    assert "warning" not in err


def test_server_status_shows_the_recorded_grade_and_the_warning(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A store built before models were graded records no grade: ``calibrate --show``
    says so, and the server's start measures and records it; ``server status`` shows
    it, and the warning, from the running server."""
    assert _index(home, "--model", WEAK) == 0
    store = Store(_db(home))  # as an earlier version left it: no measurement, a scale row
    held = record.read(store)
    assert held is not None
    store.set_settings({record.MODEL_KEY: json.dumps(held.identity()),
                        record.LEGACY_SCALE_KEY: '{"gain": 26.33, "offset": -26.0}'})
    store.seal()
    capsys.readouterr()
    assert cli.main(["calibrate", "--show"]) == 0
    assert f"model {WEAK}: grade not recorded yet" in capsys.readouterr().out

    # the server's XDG_DATA_HOME and XDG_CONFIG_HOME are home/data and home/config
    server = KGServer(home, corpus="none", env={"XDG_CACHE_HOME": str(home / "cache")})
    server.start()
    try:
        health = httpx.get(f"{server.api_url}/health", timeout=10).json()
        assert health["embedding_model"] == WEAK
        assert health["model_grade"].startswith(f"{WEAK}: separation ")
        assert any(w.startswith(WARNED.removeprefix("kg-fuse: warning: "))
                   for w in health["warnings"])
        assert cli.main(["server", "status"]) == 0
        out = capsys.readouterr().out
        assert f"kg-fuse: model {WEAK}: separation " in out
        assert WARNED in out
        with sqlite3.connect(f"file:{_db(home)}?mode=ro", uri=True) as conn:
            keys = {k for (k,) in conn.execute("SELECT key FROM settings")}
        assert record.LEGACY_SCALE_KEY not in keys  # measured again, into the record
    finally:
        server.stop()
    held = record.read_at(_db(home))
    assert held is not None and held.measured is not None and held.measured.grade.weak


def test_a_store_is_searched_with_the_model_its_record_names(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Opened without a model, the store gets its own (prompts and measured scale); a
    graph made over it with another model's embedder is refused, not searched with the
    other model's prompts and the store's scale."""
    assert _index(home, "--model", WEAK) == 0
    graph = open_graph(None)
    try:
        assert graph.model.name == WEAK
        assert graph.model.spec.prompts.query == "question: "
        assert graph.model.scale == record.read(graph.store).measured.scale  # type: ignore[union-attr]
        assert not graph.model.scale.identity
    finally:
        graph.store.close()
    store = Store(_db(home))
    try:
        with pytest.raises(ModelMismatch) as refused:
            KnowledgeGraph(store, Embedder())
        assert f"was embedded by {WEAK}, not {DEFAULT_MODEL}" in refused.value.message
        # both ways out are whole commands, to paste
        assert f"kg-fuse index --model {DEFAULT_MODEL}" in refused.value.hint
        assert f"kg-fuse serve --model {WEAK}" in refused.value.hint
    finally:
        store.close()


def _serve(home: Path) -> tuple[int, str]:
    """``kg-fuse serve`` in a process of its own (it leaves its working directory)."""
    done = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "serve", "--port", "0",
                           "--corpus", "none"], env={**os.environ}, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    return done.returncode, done.stderr


def test_a_corrupt_record_is_refused_in_one_line_and_its_hint_mends_it(
        dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = dirs
    assert _index(home) == 0
    store = Store(_db(home))
    store.set_setting(record.MODEL_KEY, '{"name": "all-MiniLM-L6-v2", "prom')
    store.seal()
    capsys.readouterr()
    refusal = (
        f"kg-fuse: the store at {_db(home)} has an unreadable model record (embedding_model"
        " = '{\"name\": \"all-MiniLM-L6-v2\", \"prom'): which model made its vectors is "
        "unknown (hint: re-embed it: kg-fuse index --model all-MiniLM-L6-v2)")
    code, err = _serve(home)
    assert (code, err.strip().splitlines()[-1]) == (1, refusal), err
    for command in (["index", "--corpus", "none"], ["calibrate"], ["calibrate", "--show"]):
        assert cli.main(command) == 1, command
        assert capsys.readouterr().err.strip().splitlines()[-1] == refusal, command
    assert cli.main(["model", "list"]) == 0  # says so, and marks no model
    out, err = capsys.readouterr()
    assert err.strip() == refusal.replace("kg-fuse: ", "kg-fuse: warning: ", 1)
    assert not [line for line in out.splitlines() if line.startswith("*")]

    assert cli.main(["index", "--model", DEFAULT_MODEL, "--corpus", "none"]) == 0
    assert (f"model {DEFAULT_MODEL}: separation 7.1, noise at 0.26 on the reference scale"
            in capsys.readouterr().out)  # re-embedded, and graded again
    held = record.read_at(_db(home))
    assert held is not None and held.name == DEFAULT_MODEL and held.measured is not None
