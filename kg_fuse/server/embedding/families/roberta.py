"""RoBERTa and XLM-RoBERTa (``model_type`` roberta, xlm-roberta): multilingual-e5,
paraphrase-multilingual-mpnet-base-v2 (an XLM-R, despite its name), all-distilroberta-v1.

BERT's layers with other embeddings, as transformers' ``XLMRobertaEmbeddings`` computes
them: positions counted from ``pad_token_id + 1`` over the tokens that are not padding
(fairseq's scheme: position ids 0 and 1 are never a token's), and no token types: the
tokenizer gives none, so every token takes row 0 of the token-type table (one row in
XLM-R's checkpoints, two in some).
"""

from __future__ import annotations

import logging
from typing import Any

from kg_fuse.server.embedding.families.bert import BertEncoder
from kg_fuse.server.embedding.families.family import Family

log = logging.getLogger(__name__)


class RobertaEncoder(BertEncoder):
    @classmethod
    def refuse(cls, config: dict[str, Any]) -> str | None:
        if not isinstance(config.get("pad_token_id", 1), int):
            return "no integer pad_token_id, which positions are counted from"
        return super().refuse(config)

    @classmethod
    def first_position(cls, config: dict[str, Any]) -> int:
        return int(config.get("pad_token_id", 1)) + 1

    def embeddings(self) -> str:
        g = self.g
        words = g.op("Gather", g.const(self.weight("embeddings.word_embeddings.weight"), "words"),
                     "input_ids")
        kinds = g.const(self.weight("embeddings.token_type_embeddings.weight")[0], "type0")
        positions = self.offset_positions(int(self.config.get("pad_token_id", 1)))
        where = g.op("Gather", g.const(self.weight("embeddings.position_embeddings.weight"),
                                       "positions"), positions)
        return self.norm(g.op("Add", g.op("Add", words, kinds), where), "embeddings.LayerNorm")


FAMILY = Family(name="XLM-RoBERTa/RoBERTa", model_types=("xlm-roberta", "roberta"),
                prefix="roberta.", token_types=False,
                positions="absolute, from pad_token_id + 1 over the tokens that are not padding",
                encoder=RobertaEncoder,
                examples="multilingual-e5-small, paraphrase-multilingual-mpnet-base-v2, "
                         "all-distilroberta-v1")
