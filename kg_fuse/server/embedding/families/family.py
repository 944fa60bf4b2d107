"""What one family of encoders says about itself: which checkpoints are its own, how their
weights are named, what the graph reads, and how a token's position is given.

A family is one file in this folder (an :class:`Encoder` that writes its layers, and its
:class:`Family` row), listed in the table of ``__init__.py``.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from kg_fuse.server.embedding.families.ops import Layers

log = logging.getLogger(__name__)

#: The feed-forward down-projections' matrix products, as :meth:`Layers.linear` names them:
#: the products the int8 variant keeps in float32 (``quantise.py`` says why).
FFN_DOWN = r"encoder\.layer\.\d+\.output\.dense\.matmul"


class Encoder(Layers, ABC):
    """A family's encoder: :meth:`encode` writes the last hidden state into the graph."""

    @abstractmethod
    def encode(self, mask: str) -> str:
        """The last hidden state, [batch, tokens, hidden]; ``mask`` is the attention
        mask as float32."""

    @classmethod
    def refuse(cls, config: dict[str, Any]) -> str | None:
        """Why a checkpoint of this family cannot be reproduced (None: it can)."""
        return None

    @classmethod
    def first_position(cls, config: dict[str, Any]) -> int:
        """The first position id a text's tokens take: the texts' longest is the
        position table's length less this."""
        return 0


@dataclass(frozen=True)
class Family:
    """One family of encoders, as :func:`kg_fuse.server.embedding.families.family_of`
    finds it by ``config.json``'s ``model_type``."""

    name: str  # as the messages and the documentation name it
    model_types: tuple[str, ...]  # config.json's model_type values that are this family
    prefix: str  # what a masked-LM checkpoint puts before the encoder's keys ("bert.")
    token_types: bool  # the graph reads token_type_ids (else row 0 of the table, if any)
    positions: str  # how a token's position is given, in words
    encoder: type[Encoder]
    examples: str  # sentence models of this family, for the messages
    kept_float: str = FFN_DOWN  # node names (a regex) the int8 variant keeps in float32

    @property
    def inputs(self) -> tuple[str, ...]:
        """The graph's inputs, as the tokenizer names them."""
        return (("input_ids", "attention_mask", "token_type_ids") if self.token_types
                else ("input_ids", "attention_mask"))
