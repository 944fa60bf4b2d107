"""BERT (``model_type`` bert): all-MiniLM-L6-v2, bge, e5, gte and their kind.

Word, token-type and absolute position embeddings (positions from 0), then post-LN
layers. What getting a choice wrong cost, measured on all-MiniLM-L6-v2 (min cosine to
sentence-transformers): tanh GELU instead of erf 0.9999947, LayerNorm epsilon 1e-5
instead of the config's 1e-12 0.9999983, positions counted from 1 0.43, no token-type
embedding 0.16, no attention mask 0.24.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from kg_fuse.server.embedding.families.family import Encoder, Family

log = logging.getLogger(__name__)


class BertEncoder(Encoder):
    """BERT's layers; RoBERTa's differ only in their embeddings (``roberta.py``)."""

    @classmethod
    def refuse(cls, config: dict[str, Any]) -> str | None:
        kind = config.get("position_embedding_type", "absolute")
        if kind != "absolute":
            return f"position_embedding_type {kind!r}, where only 'absolute' is written"
        return None

    def embeddings(self) -> str:
        g = self.g
        words = g.op("Gather", g.const(self.weight("embeddings.word_embeddings.weight"), "words"),
                     "input_ids")
        tokens = self.tokens()
        positions = g.op("Range", g.const(0, dtype=np.int64), tokens, g.const(1, dtype=np.int64))
        where = g.op("Gather", g.const(self.weight("embeddings.position_embeddings.weight"),
                                       "positions"), positions)
        kinds = g.op("Gather", g.const(self.weight("embeddings.token_type_embeddings.weight"),
                                       "types"), "token_type_ids")
        return self.norm(g.op("Add", g.op("Add", words, kinds), where), "embeddings.LayerNorm")

    def layer(self, x: str, bias: str, n: int) -> str:
        prefix = f"encoder.layer.{n}"
        attention = f"{prefix}.attention"
        merged = self.attention(x, bias, *(f"{attention}.self.{part}"
                                           for part in ("query", "key", "value")))
        x = self.residual(merged, x, f"{attention}.output.dense",
                          f"{attention}.output.LayerNorm")
        return self.feed_forward(x, prefix)

    def encode(self, mask: str) -> str:
        x = self.embeddings()
        bias = self.mask_bias(mask)
        for n in range(self.layers):
            x = self.layer(x, bias, n)
        return x


FAMILY = Family(name="BERT", model_types=("bert",), prefix="bert.", token_types=True,
                positions="absolute, from 0", encoder=BertEncoder,
                examples="all-MiniLM-L6-v2, bge-small-en-v1.5, e5-small-v2")
