"""The model is a choice: any BERT-family sentence-transformers folder gives the vectors
sentence-transformers gives (checked on small models with random weights, made here),
with its own pooling, width, depth and prompts; ``kg-fuse model add`` refuses what it
cannot serve; ``kg-fuse model list`` shows what there is; ``--model`` embeds a store."""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest

from kg_fuse import cli
from kg_fuse.server.embedding import models
from kg_fuse.server.embedding.embedder import Embedder
from tests.server.test_model_runtime import ODD_TEXTS

TEXTS = ["gzip compression of a file", "how do I read a tar archive?", "Cooking pasta",
         "json.dumps: serialise an object to a JSON formatted str",
         "the quick brown fox jumps over the lazy dog " * 30, *ODD_TEXTS]

#: name -> (BertConfig settings, pooling, Normalize module?, prompts, keys prefixed "bert.")
TINY = {
    "tiny-cls": (dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64), "cls", True, None, True),
    "tiny-wide": (dict(hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                       intermediate_size=80, layer_norm_eps=1e-2), "mean", False, None, False),
    "tiny-prompted": (dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=48), "mean", True,
                      {"query": "query: ", "document": "passage: "}, False),
}
MAX_SEQ_LENGTH = 64  # shorter than some texts: truncation is compared too


def _make_tiny(folder: Path, settings: dict, pooling: str, normalize: bool,
               prompts: dict[str, str] | None, prefixed: bool) -> None:
    """A sentence-transformers folder of a BERT with random weights (LayerNorms too),
    saved by sentence-transformers itself; the tokenizer is all-MiniLM-L6-v2's."""
    import torch
    from safetensors.numpy import load_file, save_file
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    with warnings.catch_warnings():  # the path moved in sentence-transformers 6; works in all
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers.models import Normalize, Pooling, Transformer

    torch.manual_seed(len(folder.name))
    model = BertModel(BertConfig(vocab_size=30522, **settings), add_pooling_layer=False)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "LayerNorm.weight" in name:
                weight.copy_(1 + 0.3 * torch.randn_like(weight))
            else:
                weight.normal_(0.0, 0.5 if "embeddings" in name else 0.15)
    hf = folder.with_name(folder.name + "-hf")
    model.save_pretrained(hf)
    AutoTokenizer.from_pretrained(str(models.builtin_folder())).save_pretrained(hf)
    modules = [Transformer(str(hf), max_seq_length=MAX_SEQ_LENGTH),
               Pooling(settings["hidden_size"], pooling_mode=pooling)]
    if normalize:
        modules.append(Normalize())
    SentenceTransformer(modules=modules, prompts=prompts, device="cpu").save(str(folder))
    if prefixed:  # as BertForMaskedLM checkpoints store them
        weights = folder / "model.safetensors"
        save_file({f"bert.{k}": v for k, v in load_file(str(weights)).items()}, str(weights))


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    made = {}
    for name, (settings, pooling, normalize, prompts, prefixed) in TINY.items():
        made[name] = root / name
        _make_tiny(made[name], settings, pooling, normalize, prompts, prefixed)
    return made


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize("name", list(TINY))
def test_an_added_model_gives_sentence_transformers_vectors(
        name: str, tiny_folders: dict[str, Path], user_dirs: Path) -> None:
    """Documents and queries, each with its own prompt, embedded as sentence-transformers
    embeds them: cosine >= 0.99999 for every text (cut at the model's 64 tokens)."""
    from sentence_transformers import SentenceTransformer

    settings, pooling, normalize, prompts, _ = TINY[name]
    spec = models.add_model(tiny_folders[name])
    assert spec.folder == user_dirs / "data" / "kg-fuse" / "models" / name
    assert (spec.name, spec.dimensions, spec.pooling, spec.normalize, spec.max_seq_length) == (
        name, settings["hidden_size"], pooling, normalize, MAX_SEQ_LENGTH)
    assert spec.prompts == ((prompts["query"], prompts["document"]) if prompts else ("", ""))
    assert spec.graph.exists() and spec.graph.is_relative_to(user_dirs / "cache")
    reference = SentenceTransformer(str(tiny_folders[name]), device="cpu")
    embedder = Embedder(spec)
    checks = {"document": embedder.encode(TEXTS), "query": embedder.encode_queries(TEXTS)}
    for prompt_name, ours in checks.items():
        theirs = reference.encode(TEXTS, prompt_name=prompt_name if prompts else None,
                                  normalize_embeddings=False)
        assert ours.shape == (len(TEXTS), settings["hidden_size"])
        if normalize:  # the graph normalises, as the folder's Normalize module does
            assert np.linalg.norm(ours, axis=1) == pytest.approx(1.0, abs=1e-5)
        cosines = np.sum(_unit(ours) * _unit(theirs), axis=1)
        assert cosines.min() >= 0.99999, TEXTS[int(np.argmin(cosines))][:60]
        assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    assert embedder.encode_one(TEXTS[0]) == pytest.approx(checks["query"][0], abs=1e-5)
    if prompts:  # the prompts matter: a query is not embedded as a document
        assert np.sum(_unit(checks["query"][:5]) * _unit(checks["document"][:5]),
                      axis=1).max() < 0.9999


def _add(path: Path, *extra: str) -> int:
    return cli.main(["model", "add", str(path), *extra])


def test_model_add_refuses_what_it_cannot_serve(tiny_folders: dict[str, Path],
                                                user_dirs: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Another family, a folder that is no model, a name in use: exit 2, one line that
    says why and what kg-fuse serves, and nothing copied."""
    other = user_dirs / "deberta-ish"
    shutil.copytree(tiny_folders["tiny-cls"], other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "deberta-v2"}))
    (user_dirs / "empty").mkdir()
    assert _add(tiny_folders["tiny-cls"], "--name", "mine") == 0
    capsys.readouterr()
    cases = [
        ([str(other)], "model_type 'deberta-v2' is not supported (hint: kg-fuse serves "
                       "BERT (bert), MPNet (mpnet), XLM-RoBERTa/RoBERTa (xlm-roberta, "
                       "roberta) models with mean or CLS pooling"),
        ([str(user_dirs / "empty")], "not a sentence-transformers model folder (no "
                                     "modules.json, config.json, model.safetensors, "
                                     "tokenizer.json)"),
        ([str(tiny_folders["tiny-wide"]), "--name", "mine"], "a model named 'mine' exists"),
        ([str(tiny_folders["tiny-wide"]), "--name", "all-MiniLM-L6-v2"],
         "a model named 'all-MiniLM-L6-v2' exists"),
    ]
    for argv, says in cases:
        assert cli.main(["model", "add", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("kg-fuse: ") and says in err[0], err
        assert "(hint: " in err[0]
    added = sorted(p.name for p in (user_dirs / "data" / "kg-fuse" / "models").iterdir()
                   if not p.name.startswith("."))
    assert added == ["mine"]


def _record_model(store: Path, name: str) -> None:
    """A store that says which model embedded it (only the setting matters here)."""
    store.parent.mkdir(parents=True)
    with sqlite3.connect(store) as conn:
        conn.execute("CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO settings VALUES ('embedding_model', ?)",
                     (json.dumps({"name": name, "dimensions": 48}),))


def test_model_list_shows_every_model_and_marks_the_one_in_use(
        tiny_folders: dict[str, Path], user_dirs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _add(tiny_folders["tiny-prompted"]) == 0
    capsys.readouterr()

    def listed() -> dict[str, str]:
        assert cli.main(["model", "list"]) == 0
        lines = capsys.readouterr().out.splitlines()[1:]
        return {line[2:].split()[0]: line for line in lines}

    lines = listed()
    assert set(lines) == {"all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8", "tiny-prompted",
                          "all-mpnet-base-v2", "all-mpnet-base-v2-int8"}
    for offered in ("all-mpnet-base-v2", "all-mpnet-base-v2-int8"):  # not installed here
        assert lines[offered].endswith("not installed: 404 MB to download, once (hint: "
                                       "kg-fuse model install all-mpnet-base-v2)")
    assert [n for n, line in lines.items() if line.startswith("*")] == ["all-MiniLM-L6-v2"]
    assert lines["tiny-prompted"][2:].split()[1:4] == ["32", "mean", "yes"]
    assert lines["all-MiniLM-L6-v2"][2:].split()[1:4] == ["384", "mean", "no"]
    assert str(user_dirs / "data" / "kg-fuse" / "models" / "tiny-prompted") in \
        lines["tiny-prompted"]
    _record_model(user_dirs / "data" / "kg-fuse" / "server" / "kg.sqlite3", "tiny-prompted")
    lines = listed()
    assert [n for n, line in lines.items() if line.startswith("*")] == ["tiny-prompted"]


def test_index_with_a_chosen_model_embeds_the_store_with_it(
        tiny_folders: dict[str, Path], user_dirs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``kg-fuse index --model NAME``: every stored vector is that model's (its width),
    and an unknown name is refused before any store is made."""
    assert _add(tiny_folders["tiny-wide"]) == 0
    notes = user_dirs / "notes"
    notes.mkdir()
    (notes / "bread.md").write_text("# Bread\n\nKnead the dough and let it rise.\n\n"
                                    "# Soup\n\nSimmer the vegetables for an hour.\n")
    data = user_dirs / "store"
    assert cli.main(["index", "--data-dir", str(data), "--corpus", "none", "--ingest",
                     str(notes), "--model", "nowhere"]) == 2
    assert "no embedding model named 'nowhere'" in capsys.readouterr().err
    assert not (data / "server" / "kg.sqlite3").exists()
    assert cli.main(["index", "--data-dir", str(data), "--corpus", "none", "--ingest",
                     str(notes), "--model", "tiny-wide"]) == 0
    with sqlite3.connect(data / "server" / "kg.sqlite3") as conn:
        rows = conn.execute("SELECT model, length(vector) FROM concept_views").fetchall()
    assert rows and set(rows) == {("tiny-wide", 48 * 4)}  # float32s of 48 dimensions


def test_half_precision_and_prefixed_weights_are_read_as_float32(tmp_path: Path) -> None:
    """Weights saved in float16 or bfloat16 (numpy has no bfloat16), under ``bert.`` or
    TensorFlow's LayerNorm names, reach the graph as the float32 values they hold."""
    import torch
    from safetensors.torch import save_file

    from kg_fuse.server.embedding.graph import read_weights

    values = torch.tensor([[1.5, -2.25], [0.0078125, 3.0]])
    path = tmp_path / "model.safetensors"
    save_file({"bert.encoder.w": values.to(torch.bfloat16), "embeddings.b": values.half(),
               "embeddings.LayerNorm.gamma": values}, str(path))
    weights = read_weights(path, "bert.")
    assert set(weights) == {"encoder.w", "embeddings.b", "embeddings.LayerNorm.weight"}
    for got in weights.values():
        assert got.dtype == np.float32 and got.tolist() == values.tolist()
