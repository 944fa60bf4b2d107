"""MPNet (``model_type`` mpnet): all-mpnet-base-v2, multi-qa-mpnet-base-dot-v1 and
multi-qa-mpnet-base-cos-v1.

As transformers' ``MPNetModel`` computes it: word and absolute position embeddings, no
token types; positions counted from 2 over the tokens that are not padding (the padding
index is 1 whatever the config says); and, in every layer, one shared relative attention
bias added to the scaled scores: the distance from each token to each other one put in
one of 32 log-spaced buckets (16 a direction, exact up to 8 apart, the last for 128 and
more; ``MPNetEncoder.compute_position_bias`` always takes 32, whatever
``relative_attention_num_buckets`` says), each bucket a learnt value per head.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from kg_fuse.server.embedding.families.family import Encoder, Family

log = logging.getLogger(__name__)

PADDING_IDX = 1  # MPNetEmbeddings.padding_idx, fixed
BUCKETS = 32  # MPNetEncoder.compute_position_bias's num_buckets, fixed
MAX_DISTANCE = 128


def relative_buckets(relative: np.ndarray, buckets: int = BUCKETS,
                     max_distance: int = MAX_DISTANCE) -> np.ndarray:
    """``MPNetEncoder.relative_position_bucket`` in numpy, in float32 as torch computes
    it (the tests compare the two over every distance up to 1,100)."""
    n = -np.asarray(relative, dtype=np.int64)
    half = buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    small = n < exact
    with np.errstate(divide="ignore"):  # log(0) where n is small: not taken
        scaled = (np.log(n.astype(np.float32) / np.float32(exact))
                  / np.float32(math.log(max_distance / exact)) * np.float32(half - exact))
    large = np.minimum(exact + np.where(small, 0, scaled).astype(np.int64), half - 1)
    return out + np.where(small, n, large)


class MPNetEncoder(Encoder):
    @classmethod
    def refuse(cls, config: dict[str, Any]) -> str | None:
        rows = int(config.get("relative_attention_num_buckets", BUCKETS))
        if rows < BUCKETS:
            return (f"relative_attention_num_buckets {rows}, where MPNetModel looks up "
                    f"{BUCKETS}")
        return None

    @classmethod
    def first_position(cls, config: dict[str, Any]) -> int:
        return PADDING_IDX + 1

    def embeddings(self) -> str:
        g = self.g
        words = g.op("Gather", g.const(self.weight("embeddings.word_embeddings.weight"), "words"),
                     "input_ids")
        where = g.op("Gather", g.const(self.weight("embeddings.position_embeddings.weight"),
                                       "positions"), self.offset_positions(PADDING_IDX))
        return self.norm(g.op("Add", words, where), "embeddings.LayerNorm")

    def position_bias(self) -> str:
        """[1, heads, tokens, tokens]: the bias of each query token (row) for each key
        token (column), looked up by their distance in a table made here, over every
        distance the position table allows."""
        g = self.g
        table = self.weight("encoder.relative_attention_bias.weight")  # [buckets, heads]
        if table.shape[0] < BUCKETS or table.shape[1] != self.heads:
            raise ValueError(f"encoder.relative_attention_bias.weight is {table.shape}")
        furthest = int(self.config.get("max_position_embeddings", 514)) - 1
        by_distance = table[relative_buckets(np.arange(-furthest, furthest + 1))]
        index = g.op("Range", g.const(0, dtype=np.int64), self.tokens(),
                     g.const(1, dtype=np.int64))
        distance = g.op("Sub", g.op("Unsqueeze", index, g.const([0], dtype=np.int64)),
                        g.op("Unsqueeze", index, g.const([1], dtype=np.int64)))
        looked = g.op("Gather", g.const(by_distance, "relative"),
                      g.op("Add", distance, g.const(furthest, dtype=np.int64)))
        return g.op("Unsqueeze", g.op("Transpose", looked, perm=[2, 0, 1]),
                    g.const([0], dtype=np.int64))

    def layer(self, x: str, bias: str, n: int) -> str:
        prefix = f"encoder.layer.{n}"
        attention = f"{prefix}.attention"
        merged = self.attention(x, bias, *(f"{attention}.attn.{part}" for part in "qkv"),
                                divide=True)
        x = self.residual(merged, x, f"{attention}.attn.o", f"{attention}.LayerNorm")
        return self.feed_forward(x, prefix)

    def encode(self, mask: str) -> str:
        x = self.embeddings()
        # scores + position bias + mask, as torch adds them: the mask is 0 wherever a
        # score is kept, so adding the two biases first changes no kept score
        bias = self.g.op("Add", self.position_bias(), self.mask_bias(mask))
        for n in range(self.layers):
            x = self.layer(x, bias, n)
        return x


FAMILY = Family(name="MPNet", model_types=("mpnet",), prefix="mpnet.", token_types=False,
                positions="absolute from 2 over the tokens that are not padding, and a "
                          "relative attention bias (32 buckets) shared by every layer",
                encoder=MPNetEncoder,
                examples="all-mpnet-base-v2, multi-qa-mpnet-base-cos-v1")
