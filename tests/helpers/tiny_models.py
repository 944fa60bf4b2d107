"""Small sentence-transformers folders of each encoder family, with random weights and a
tokenizer made here (nothing downloaded), saved by sentence-transformers itself: the
references the families' graphs are checked against.

The tokenizers are the families' kinds: MPNet's is all-MiniLM-L6-v2's WordPiece
vocabulary behind MPNet's four special tokens (``<s> <pad> </s> <unk>``: padding is id
1, as MPNet's positions expect); XLM-RoBERTa's a SentencePiece-style Unigram model
trained here on a few standard-library docstrings, with the same four special tokens.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0-3 in MPNet's and XLM-R's vocabularies


@dataclass(frozen=True)
class Tiny:
    """One small model: its transformers config class and settings, and its modules."""

    config: str  # transformers' config class: MPNetConfig, XLMRobertaConfig, ...
    settings: dict[str, Any]
    tokenizer: str  # "wordpiece" (MPNet's kind) or "unigram" (XLM-R's kind)
    pooling: str
    normalize: bool
    max_seq_length: int
    prompts: dict[str, str] | None = None
    prefix: str = ""  # put before every weight key, as masked-LM checkpoints store them
    seed: int = 0


def _finish(tokenizer: Any) -> Any:
    """A ``tokenizers`` tokenizer as transformers' fast tokenizer, with the four specials
    (``<s> A </s>``), giving no token types, as MPNet's and XLM-R's tokenizers give none."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
        cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
        model_input_names=["input_ids", "attention_mask"])


def wordpiece_tokenizer() -> Any:
    """MPNet's kind: all-MiniLM-L6-v2's WordPiece vocabulary, shifted behind the specials."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    from kg_fuse.server.embedding.models import builtin_folder

    shipped = json.loads((builtin_folder() / "tokenizer.json").read_text())["model"]["vocab"]
    vocab = {token: n for n, token in enumerate(SPECIALS)}
    for token, n in sorted(shipped.items(), key=lambda item: item[1]):
        vocab[token] = n + len(SPECIALS)
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    return _finish(tokenizer)


def unigram_tokenizer() -> Any:
    """XLM-R's kind: a Unigram model (600 pieces) trained here on docstrings."""
    import collections
    import gzip
    import tarfile
    import textwrap

    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    corpus = [m.__doc__ for m in (json, gzip, tarfile, textwrap, collections, warnings)
              if m.__doc__]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.train_from_iterator(corpus, trainers.UnigramTrainer(
        vocab_size=600, special_tokens=list(SPECIALS), unk_token="<unk>"))
    return _finish(tokenizer)


def make_tiny(folder: Path, tiny: Tiny) -> None:
    """The folder of ``tiny``: random weights (LayerNorms and the relative attention bias
    too, so every part of the graph shows), saved by sentence-transformers."""
    import torch
    import transformers
    from safetensors.numpy import load_file, save_file
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():  # the path moved in sentence-transformers 6; works in all
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers.models import Normalize, Pooling, Transformer

    tokenizer = (wordpiece_tokenizer if tiny.tokenizer == "wordpiece" else unigram_tokenizer)()
    config = getattr(transformers, tiny.config)(vocab_size=len(tokenizer), **tiny.settings)
    model = transformers.AutoModel.from_config(config)
    torch.manual_seed(tiny.seed)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "LayerNorm.weight" in name:
                weight.copy_(1 + 0.3 * torch.randn_like(weight))
            elif "relative_attention_bias" in name:
                weight.normal_(0.0, 1.0)
            else:
                weight.normal_(0.0, 0.5 if "embeddings" in name else 0.15)
    hf = folder.with_name(folder.name + "-hf")
    model.save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    modules = [Transformer(str(hf), max_seq_length=tiny.max_seq_length),
               Pooling(config.hidden_size, pooling_mode=tiny.pooling)]
    if tiny.normalize:
        modules.append(Normalize())
    SentenceTransformer(modules=modules, prompts=tiny.prompts, device="cpu").save(str(folder))
    if tiny.prefix:
        weights = folder / "model.safetensors"
        save_file({tiny.prefix + k: v for k, v in load_file(str(weights)).items()}, str(weights))
