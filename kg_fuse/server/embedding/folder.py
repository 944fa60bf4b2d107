"""What a sentence-transformers folder says about its model, read without loading it.

A folder as ``SentenceTransformer.save`` (or a Hugging Face repository of a sentence
model) lays it out: ``modules.json`` naming a Transformer, a Pooling and perhaps a
Normalize module; ``config.json`` (the transformer's hyper-parameters);
``model.safetensors``; ``tokenizer.json``; ``1_Pooling/config.json``; and
``sentence_bert_config.json`` and ``config_sentence_transformers.json`` (truncation,
lower-casing, prompts). Both the older file formats (``max_seq_length`` in
``sentence_bert_config.json``, ``pooling_mode_*_token`` flags) and sentence-transformers
6's (``model_max_length`` in ``tokenizer_config.json``, ``pooling_mode``) are read, the
way sentence-transformers reads them, so the same texts are cut and pooled the same way.

Anything the graph builder cannot reproduce exactly is refused here, with the reason, so
a model is never served with vectors other than its own.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kg_fuse.exits import UsageError
from kg_fuse.server.embedding.families import (
    ACTIVATIONS,
    FAMILIES,
    Family,
    UnknownFamily,
    family_of,
    supported,
)

log = logging.getLogger(__name__)

SUPPORTED = f"{supported()} models with mean or CLS pooling"
REQUIRED = ("modules.json", "config.json", "model.safetensors", "tokenizer.json")
_LEGACY_POOLING = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                   "pooling_mode_max_tokens": "max",
                   "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                   "pooling_mode_weightedmean_tokens": "weightedmean",
                   "pooling_mode_lasttoken": "lasttoken"}
#: sentence-transformers' own prompt names, then e5's and nomic's
QUERY_PROMPTS = ("query", "search_query")
DOCUMENT_PROMPTS = ("document", "passage", "corpus", "search_document")


class Prompts(NamedTuple):
    """Text put before a query, and before a document, as the model was trained with."""

    query: str = ""
    document: str = ""


@dataclass(frozen=True)
class FolderModel:
    """What the graph builder and the embedder need from a folder."""

    config: dict[str, Any]
    family: Family
    dimensions: int
    max_seq_length: int
    pooling: str
    normalize: bool
    prompts: Prompts


class NotAModel(UsageError):
    """A folder kg-fuse cannot serve as a model (exit 2)."""


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise NotAModel(f"{path}: unreadable JSON ({exc})",
                        hint="copy the model's folder again") from None


def _modules(folder: Path) -> tuple[str | None, bool]:
    """The Pooling module's folder and whether a Normalize module follows it."""
    modules = _json(folder / "modules.json")
    if not isinstance(modules, list):
        raise NotAModel(f"{folder}/modules.json is not a sentence-transformers module list",
                        hint="save the model with sentence-transformers first")
    pooling, normalize = None, False
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        path = str(module.get("path", ""))
        if kind == "Transformer":
            if path not in ("", "."):
                raise NotAModel(f"{folder}: its Transformer module is in {path}/ (an old "
                                "sentence-transformers layout)",
                                hint="save it again with a current sentence-transformers")
        elif kind == "Pooling":
            pooling = path
        elif kind == "Normalize":
            normalize = True
        else:
            raise NotAModel(f"{folder}: its {kind or 'unnamed'} module is not supported",
                            hint=f"kg-fuse serves {SUPPORTED}, optionally normalised")
    return pooling, normalize


def _pooling(folder: Path, pooling_dir: str | None) -> str:
    if pooling_dir is None:
        raise NotAModel(f"{folder}: modules.json names no Pooling module",
                        hint=f"kg-fuse serves {SUPPORTED}")
    config = _json(folder / pooling_dir / "config.json") or {}
    mode = config.get("pooling_mode")
    if mode is None:
        mode = [name for key, name in _LEGACY_POOLING.items() if config.get(key)]
    modes = [mode] if isinstance(mode, str) else list(mode)
    if len(modes) != 1 or modes[0] not in ("mean", "cls"):
        raise NotAModel(f"{folder}: pooling {'+'.join(modes) or 'none'} is not supported",
                        hint=f"kg-fuse serves {SUPPORTED}")
    if config.get("include_prompt") is False:
        raise NotAModel(f"{folder}: its pooling leaves the prompt out (include_prompt false)",
                        hint=f"kg-fuse serves {SUPPORTED} that pool the prompt too")
    return modes[0]


def _prompts(folder: Path) -> Prompts:
    """The query and document prompts as sentence-transformers' ``encode_query`` and
    ``encode_document`` pick them; the default prompt where neither names one."""
    settings = _json(folder / "config_sentence_transformers.json") or {}
    prompts = {str(k): str(v) for k, v in (settings.get("prompts") or {}).items()}
    fallback = prompts.get(str(settings.get("default_prompt_name")), "")

    def first(names: tuple[str, ...]) -> str:
        return next((prompts[n] for n in names if n in prompts), fallback)

    return Prompts(first(QUERY_PROMPTS), first(DOCUMENT_PROMPTS))


def _max_seq_length(folder: Path, config: dict[str, Any], bert: dict[str, Any],
                    family: Family) -> int:
    """sentence-transformers' truncation: ``max_seq_length`` (older folders), else the
    tokenizer's ``model_max_length`` capped at the model's positions; refused if longer
    than a text can be (the table less the positions a family never gives a token)."""
    positions = int(config.get("max_position_embeddings", 512))
    kwargs = bert.get("processor_kwargs") or bert.get("tokenizer_args") or {}
    length = bert.get("max_seq_length") or kwargs.get("model_max_length")
    if length is None:
        tokenizer = _json(folder / "tokenizer_config.json") or {}
        length = min(int(tokenizer.get("model_max_length", positions)), positions)
    length = int(length)
    usable = positions - family.encoder.first_position(config)
    if not 0 < length <= usable:
        raise NotAModel(f"{folder}: truncation at {length} tokens, but the model has "
                        f"{usable} positions", hint="fix max_seq_length in the folder")
    return length


def read_folder(folder: Path) -> FolderModel:
    """Read and check a sentence-transformers folder; :class:`NotAModel` says what is wrong."""
    if not folder.is_dir():
        raise NotAModel(f"{folder}: not a directory",
                        hint="give the folder of a sentence-transformers model")
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        hint = ("convert the weights to safetensors on a machine with torch"
                if missing == ["model.safetensors"] and (folder / "pytorch_model.bin").exists()
                else "give the folder of a sentence-transformers model (e.g. a copy of "
                     "its Hugging Face repository)")
        raise NotAModel(f"{folder}: not a sentence-transformers model folder (no "
                        f"{', '.join(missing)})", hint=hint)
    config = _json(folder / "config.json") or {}
    family = _family(folder, config)
    pooling_dir, normalize = _modules(folder)
    bert = _json(folder / "sentence_bert_config.json") or {}
    return FolderModel(config=config, family=family, dimensions=int(config["hidden_size"]),
                       max_seq_length=_max_seq_length(folder, config, bert, family),
                       pooling=_pooling(folder, pooling_dir), normalize=normalize,
                       prompts=_prompts(folder))


def _family(folder: Path, config: dict[str, Any]) -> Family:
    """The folder's family (:func:`family_of`), its configuration checked against it."""
    try:
        family = family_of(config.get("model_type"))
    except UnknownFamily as exc:
        examples = "; ".join(f"{f.name}: {f.examples}" for f in FAMILIES)
        raise NotAModel(f"{folder}: {exc}",
                        hint=f"kg-fuse serves {SUPPORTED}, e.g. {examples}") from None
    sizes = [config.get(key) for key in ("hidden_size", "num_attention_heads",
                                         "num_hidden_layers")]
    if not all(isinstance(n, int) and n > 0 for n in sizes) or sizes[0] % sizes[1]:
        raise NotAModel(f"{folder}/config.json: no usable hidden_size, num_attention_heads "
                        "and num_hidden_layers", hint="copy the model's folder again")
    reason = family.encoder.refuse(config)
    if reason is None and config.get("hidden_act", "gelu") not in ACTIVATIONS:
        reason = f"activation {config.get('hidden_act')!r}"
    if reason is not None:
        raise NotAModel(f"{folder}: kg-fuse cannot reproduce this {family.name} model: "
                        f"{reason}", hint=f"kg-fuse serves {SUPPORTED}")
    return family


def load_tokenizer(folder: Path, max_seq_length: int) -> Any:
    """The folder's ``tokenizer.json``, cutting at ``max_seq_length`` and padding to the
    longest text of a batch (as shipped it may cut and pad to a fixed 128: cosine 0.81)
    with its own padding token, else the model's ``pad_token_id`` (XLM-R's and MPNet's
    is 1, their positions skip it)."""
    from tokenizers import Tokenizer, normalizers

    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_seq_length)
    shipped = tokenizer.padding or {}
    model_pad = (_json(folder / "config.json") or {}).get("pad_token_id")
    pad_id = int(shipped.get("pad_id", model_pad if isinstance(model_pad, int) else 0))
    tokenizer.enable_padding(pad_id=pad_id, pad_type_id=int(shipped.get("pad_type_id", 0)),
                             pad_token=shipped.get("pad_token") or
                             tokenizer.id_to_token(pad_id) or "[PAD]")
    bert = _json(folder / "sentence_bert_config.json") or {}
    if bert.get("do_lower_case"):  # as sentence-transformers does: a Lowercase step first
        steps = [normalizers.Lowercase()]
        if tokenizer.normalizer is not None:
            steps.append(tokenizer.normalizer)
        tokenizer.normalizer = normalizers.Sequence(steps)
    return tokenizer
