"""A concept's views (noether's fused semantic index) and how they are fused.

Each concept is embedded as up to three separate texts:

- ``name``: its label with dotted/underscored/camel-case names split into words
  ("os.path.join" -> "os path join"), followed by its signature when it has one;
- ``description``: its label and first paragraph, ``"label: first paragraph"`` (the
  text embedded before views existed: the description read in the context of its name
  scores better than the bare paragraph, and an older store's vectors are reused as
  this view without re-embedding);
- ``examples``: its examples, or else the rest of its evidence (the paragraphs after
  the first), cut to :data:`EXAMPLES_CHARS` so one long docstring cannot dominate the
  build time.

The search score is a weighted sum of the query's cosines with the views. With a unit
query vector ``q`` that sum is linear, ``sum_i w_i (q . v_i) = q . sum_i w_i v_i``, so the
index keeps one fused vector per concept and a search stays a single matrix scan. The
weights are renormalised over the views a concept has, so a concept without examples
is not penalised: its score is still a convex combination of cosines, in [-1, 1].
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from kg_fuse.server.corpus import one_line
from kg_fuse.server.search import tuning

VIEWS: tuple[str, ...] = ("name", "description", "examples")
#: Chosen with ``kg-fuse eval`` (see docs/server.md, "Fused views").
WEIGHTS: dict[str, float] = tuning.VIEW_WEIGHTS.value
EXAMPLES_CHARS = tuning.EXAMPLES_CHARS.value
#: A first paragraph this short says nothing the name does not ("Return an enumerate
#: object."); the description view then reads on into the next paragraphs, up to
#: ELABORATION_CHARS of them.
SHORT_SUMMARY_WORDS = tuning.SHORT_SUMMARY_WORDS.value
ELABORATION_CHARS = tuning.ELABORATION_CHARS.value


def embedded_views(weights: Mapping[str, float] = WEIGHTS) -> tuple[str, ...]:
    """The views worth embedding: those with a weight (a zero-weight view would cost
    build time and change no score). The description view when none has a weight."""
    return tuple(v for v in VIEWS if weights.get(v, 0.0) > 0) or ("description",)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[._\s]+")


def split_name(label: str) -> str:
    """'os.path.join' -> 'os path join'; 'TemporaryDirectory' -> 'Temporary Directory'."""
    words = []
    for part in _SEPARATORS.split(label):
        if part:
            words.append(_CAMEL.sub(" ", part))
    return " ".join(words) if words else label.strip()


def _squash(text: str) -> str:
    return one_line(text)


def view_texts(label: str, description: str, signature: str = "", examples: str = "",
               evidence: Sequence[str] = ()) -> dict[str, str]:
    """The texts to embed for one concept, by view; empty views are left out."""
    name = split_name(label)
    if signature:
        name = f"{name} {_squash(signature)}"
    desc = _squash(description)
    texts = {"name": name, "description": f"{label}: {desc}" if desc else label}
    extra = examples.strip()
    if not extra:
        extra = " ".join(p for p in (_squash(e) for e in evidence) if p and p != desc)
    if extra:
        texts["examples"] = _squash(extra)[:EXAMPLES_CHARS]
        if (desc.count(" ") + 1 if desc else 0) <= SHORT_SUMMARY_WORDS:  # its words
            texts["description"] += " " + texts["examples"][:ELABORATION_CHARS]
    return texts


def fuse(vectors: Mapping[str, np.ndarray],
         weights: Mapping[str, float] = WEIGHTS) -> np.ndarray:
    """The weighted sum of a concept's view vectors, weights renormalised over its views."""
    present = [v for v in VIEWS if v in vectors and weights.get(v, 0.0) > 0]
    if not present:
        present = [v for v in VIEWS if v in vectors]
        weights = {v: 1.0 for v in present}
    total = sum(weights[v] for v in present)
    fused = sum((weights[v] / total) * np.asarray(vectors[v], np.float32) for v in present)
    return np.asarray(fused, dtype=np.float32)
