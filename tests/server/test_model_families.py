"""MPNet and XLM-RoBERTa/RoBERTa folders give the vectors sentence-transformers gives,
from graphs written without torch (checked on small models with random weights, made
here, with texts cut at the model's length and with prompts); the check fails when a
family's positions, buckets or token types are written wrong; ``kg-fuse model add``
takes these families and refuses any other, naming the ones it serves."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kg_fuse import cli
from kg_fuse.server.embedding import models
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.families import mpnet, ops
from tests.helpers.tiny_models import Tiny, make_tiny
from tests.server.test_model_choice import TEXTS

PROMPTED = {"query": "query: ", "document": "passage: "}
TINY = {
    # mean pooling, normalised, a query prompt alone; cut at 160 tokens: distances past
    # 128, MPNet's last bucket
    "tiny-mpnet": Tiny("MPNetConfig", dict(hidden_size=32, num_hidden_layers=2,
                                           num_attention_heads=4, intermediate_size=64),
                       "wordpiece", "mean", True, 160, prompts={"query": "query: "}),
    # CLS pooling, keys under "mpnet.", a 40-row bias table (MPNet looks up 32 of them)
    "tiny-mpnet-cls": Tiny("MPNetConfig", dict(hidden_size=48, num_hidden_layers=2,
                                               num_attention_heads=4, intermediate_size=80,
                                               layer_norm_eps=1e-5,
                                               relative_attention_num_buckets=40),
                           "wordpiece", "cls", False, 96, prefix="mpnet.", seed=1),
    # every position of the table used: 130 rows, 2 never a token's, cut at 128
    "tiny-xlmr": Tiny("XLMRobertaConfig", dict(hidden_size=32, num_hidden_layers=2,
                                               num_attention_heads=4, intermediate_size=64,
                                               max_position_embeddings=130,
                                               type_vocab_size=1),
                      "unigram", "mean", True, 128, prompts=PROMPTED, seed=2),
    # two token-type rows (row 0 is every token's), keys under "roberta.", tanh GELU
    "tiny-roberta": Tiny("RobertaConfig", dict(hidden_size=48, num_hidden_layers=2,
                                               num_attention_heads=4, intermediate_size=80,
                                               max_position_embeddings=100,
                                               type_vocab_size=2, hidden_act="gelu_new"),
                         "unigram", "cls", False, 64, prefix="roberta.", seed=3),
}


class Reference:
    """A tiny model's folder and sentence-transformers' vectors of ``TEXTS``."""

    def __init__(self, folder: Path, tiny: Tiny) -> None:
        from sentence_transformers import SentenceTransformer

        self.folder = folder
        self.tiny = tiny
        model = SentenceTransformer(str(folder), device="cpu")
        self.tokens = max(len(model.tokenizer(t)["input_ids"]) for t in TEXTS)
        self.vectors = {kind: model.encode(TEXTS, prompt_name=kind if tiny.prompts else None,
                                           normalize_embeddings=False)
                        for kind in ("document", "query")}

    def worst(self, spec: models.ModelSpec) -> float:
        """The least cosine between our vectors and these, documents and queries."""
        embedder = Embedder(spec)
        ours = {"document": embedder.encode(TEXTS), "query": embedder.encode_queries(TEXTS)}
        return min(float(np.min(np.sum(_unit(ours[k]) * _unit(self.vectors[k]), axis=1)))
                   for k in ours)


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Reference]:
    root = tmp_path_factory.mktemp("tiny-families")
    made = {}
    for name, tiny in TINY.items():
        make_tiny(root / name, tiny)
        made[name] = Reference(root / name, tiny)
    return made


def test_mpnets_buckets_are_transformers_own() -> None:
    """Every distance a text can span (and more) falls in the bucket MPNet puts it in."""
    import torch
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

    distances = np.arange(-1100, 1101)
    theirs = MPNetEncoder.relative_position_bucket(torch.from_numpy(distances)).numpy()
    assert (mpnet.relative_buckets(distances) == theirs).all()


@pytest.mark.parametrize("name", list(TINY))
def test_a_familys_model_gives_sentence_transformers_vectors(
        name: str, references: dict[str, Reference], user_dirs: Path) -> None:
    """Documents and queries, each with its prompt, embedded as sentence-transformers
    embeds them, texts longer than the model's length cut where it cuts them."""
    import onnx

    reference = references[name]
    tiny = reference.tiny
    assert reference.tokens >= tiny.max_seq_length  # some texts are cut
    spec = models.add_model(reference.folder)
    assert spec.family.name == ("MPNet" if "mpnet" in name else "XLM-RoBERTa/RoBERTa")
    assert (spec.dimensions, spec.pooling, spec.normalize, spec.max_seq_length) == (
        tiny.settings["hidden_size"], tiny.pooling, tiny.normalize, tiny.max_seq_length)
    prompts = tiny.prompts or {}
    assert spec.prompts == (prompts.get("query", ""), prompts.get("document", ""))
    inputs = [i.name for i in onnx.load(str(spec.graph), load_external_data=False).graph.input]
    assert inputs == ["input_ids", "attention_mask"]  # no token types: the tokenizer has none
    assert reference.worst(spec) >= 0.99999
    if tiny.prompts:  # the prompts are in use: a query is not embedded as a document
        document, query = (reference.vectors[k][:5] for k in ("document", "query"))
        assert np.sum(_unit(document) * _unit(query), axis=1).max() < 0.9999


_real_positions = ops.Layers.offset_positions
_real_weight = ops.Layers.weight
_real_buckets = mpnet.relative_buckets


def _positions_from(start: int) -> Callable[[ops.Layers, int], str]:
    """Positions counted from ``start`` instead of ``pad + 1``."""
    def positions(layers: ops.Layers, pad: int) -> str:
        shift = layers.g.const(pad + 1 - start, dtype=np.int64)
        return layers.g.op("Sub", _real_positions(layers, pad), shift)
    return positions


def _type_row(row: int | None) -> Callable[[ops.Layers, str], np.ndarray]:
    """The token-type table with ``row`` first (None: all zeros, as if there were none)."""
    def weight(layers: ops.Layers, key: str) -> np.ndarray:
        value = _real_weight(layers, key)
        if "token_type_embeddings" not in key:
            return value
        return np.zeros_like(value) if row is None else value[[row]]
    return weight


#: name -> (model, what is patched, the wrong version)
MUTANTS: dict[str, tuple[str, tuple[object, str], object]] = {
    "mpnet positions from 0": ("tiny-mpnet", (ops.Layers, "offset_positions"),
                               _positions_from(0)),
    "mpnet positions from 1": ("tiny-mpnet", (ops.Layers, "offset_positions"),
                               _positions_from(1)),
    "mpnet buckets one up": ("tiny-mpnet", (mpnet, "relative_buckets"),
                             lambda d: np.minimum(_real_buckets(d) + 1, mpnet.BUCKETS - 1)),
    "mpnet buckets the other way": ("tiny-mpnet", (mpnet, "relative_buckets"),
                                    lambda d: _real_buckets(-d)),
    "mpnet no relative bias": ("tiny-mpnet", (mpnet.MPNetEncoder, "position_bias"),
                               lambda layers: layers.g.const(np.zeros((1, 1, 1, 1)))),
    "xlmr positions from 0": ("tiny-xlmr", (ops.Layers, "offset_positions"),
                              _positions_from(0)),
    "xlmr positions from 1": ("tiny-xlmr", (ops.Layers, "offset_positions"),
                              _positions_from(1)),
    "xlmr no token-type row": ("tiny-xlmr", (ops.Layers, "weight"), _type_row(None)),
    "roberta token type 1": ("tiny-roberta", (ops.Layers, "weight"), _type_row(1)),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_check_fails_when_a_family_is_written_wrong(
        mutant: str, references: dict[str, Reference], user_dirs: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each wrong choice a family's graph could make is caught by the comparison above
    (its least cosine falls under 0.99999), so passing it means something."""
    name, (owner, attribute), wrong = MUTANTS[mutant]
    monkeypatch.setattr(owner, attribute, wrong)
    spec = models.add_model(references[name].folder)
    assert references[name].worst(spec) < 0.99999


def test_model_add_takes_the_families_and_refuses_any_other(
        references: dict[str, Reference], user_dirs: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """MPNet and XLM-R folders are added; another model_type, or a truncation longer than
    the positions a family gives a text, is refused in one line naming the reason."""
    assert cli.main(["model", "add", str(references["tiny-mpnet"].folder)]) == 0
    assert cli.main(["model", "add", str(references["tiny-xlmr"].folder)]) == 0
    said = capsys.readouterr().out
    assert "added model tiny-mpnet (MPNet, 32 dimensions, mean pooling" in said
    assert "added model tiny-xlmr (XLM-RoBERTa/RoBERTa, 32 dimensions" in said
    other = user_dirs / "modernbert-ish"
    shutil.copytree(references["tiny-xlmr"].folder, other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "model_type": "modernbert"}))
    too_long = user_dirs / "too-long"
    shutil.copytree(references["tiny-xlmr"].folder, too_long)
    bert = json.loads((too_long / "sentence_bert_config.json").read_text())
    (too_long / "sentence_bert_config.json").write_text(
        json.dumps({**bert, "max_seq_length": 130}))
    cases = [
        (other, "model_type 'modernbert' is not supported (hint: kg-fuse serves BERT (bert), "
                "MPNet (mpnet), XLM-RoBERTa/RoBERTa (xlm-roberta, roberta) models with mean "
                "or CLS pooling, e.g. BERT: all-MiniLM-L6-v2"),
        (too_long, "truncation at 130 tokens, but the model has 128 positions"),
    ]
    for folder, says in cases:
        assert cli.main(["model", "add", str(folder)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert cli.main(["model", "list"]) == 0
    listed = {line[2:].split()[0]: line[2:].split()
              for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(listed) == {"all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8", "tiny-mpnet",
                           "tiny-xlmr", "all-mpnet-base-v2", "all-mpnet-base-v2-int8"}
    assert [listed[n][4] for n in ("all-MiniLM-L6-v2", "tiny-mpnet", "tiny-xlmr")] == [
        "BERT", "MPNet", "XLM-RoBERTa/RoBERTa"]
    # a model broken by hand since it was added is listed so, with what to do
    added = user_dirs / "data" / "kg-fuse" / "models" / "tiny-xlmr"
    (added / "config.json").write_text("{")
    assert cli.main(["model", "list"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "tiny-xlmr" in line]
    assert len(rows) == 1 and "broken: " in rows[0], rows
    assert f"rm -r -- {added}" in rows[0], rows
