"""The encoder families kg-fuse writes graphs for, and the one place a family is chosen:
:func:`family_of`, by ``config.json``'s ``model_type``.

Adding a family is a change in this folder: a file with its :class:`Encoder` and its
:class:`Family` row (``bert.py``, ``roberta.py`` and ``mpnet.py`` are the examples; the
shared layers are in ``ops.py``), and its row in :data:`FAMILIES` below. Nothing outside
the folder names a family.
"""

from __future__ import annotations

import logging

from kg_fuse.server.embedding.families import bert, mpnet, roberta
from kg_fuse.server.embedding.families.family import Encoder, Family
from kg_fuse.server.embedding.families.ops import ACTIVATIONS, Graph

log = logging.getLogger(__name__)

__all__ = ["ACTIVATIONS", "FAMILIES", "Encoder", "Family", "Graph", "UnknownFamily", "family_of",
           "supported"]

FAMILIES: tuple[Family, ...] = (bert.FAMILY, mpnet.FAMILY, roberta.FAMILY)


class UnknownFamily(ValueError):
    """A ``model_type`` no family here writes."""


def family_of(model_type: object) -> Family:
    """The family whose checkpoints say ``model_type``; :class:`UnknownFamily` otherwise."""
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    raise UnknownFamily(f"model_type {model_type!r} is not supported")


def supported() -> str:
    """The families, in words, for messages: 'BERT (bert), MPNet (mpnet), ...'."""
    return ", ".join(f"{f.name} ({', '.join(f.model_types)})" for f in FAMILIES)
