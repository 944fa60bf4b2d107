"""How well a model tells related from unrelated text, measured when it is added: its
grade, shown by ``kg-fuse model list``, and a warning for a model that cannot separate
them well enough for a default threshold to keep nonsense out.

The measurement is the score scale's (:mod:`kg_fuse.server.threshold.score_scale`): the
same 32 everyday questions and the sentences that answer them, each question against
its own answer (related) and against the 31 others (unrelated), embedded with the
model's own prompts. The scale maps only the two means; the grade says how wide the
unrelated pairs spread around theirs:

- **separation**: how many of the unrelated pairs' standard deviations the related mean
  lies above the unrelated mean. Any linear map of the cosines leaves it unchanged, so
  a model that squeezes its cosines into [0.7, 1] is not marked down for that.
  all-MiniLM-L6-v2: 7.06 (its int8 variant 7.04).
- **noise**: where the unrelated pairs' 99th percentile falls once mapped onto the
  reference scale, the scale every tuned score and the calibrated default are in.
  all-MiniLM-L6-v2: 0.26 (its gibberish on the stdlib store sits about there too).

A model whose noise maps above :data:`NOISY` gets a warning. The figure is a guard, not
tuned on real weak models (none can be made here): all-MiniLM-L6-v2's vectors with
Gaussian noise added (one draw, ``tests/server/test_model_grade.py``) pass it at sd 0.05
(noise 0.32, separation 4.9, its own answer first for 31 of 32 questions) and fail it at
sd 0.08 (0.55, 2.5, 19 of 32). Small models with random weights score noise far off the
scale (capped at 9.99) and a separation near 0.
Grades are kept by model name and weights digest in the cache directory beside the
graphs, so each model is measured once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.models import ModelSpec, graphs_dir
from kg_fuse.server.threshold.score_scale import PAIRS, RELATED_REF, UNRELATED_REF

log = logging.getLogger(__name__)

#: Noise (the unrelated pairs' 99th percentile on the reference scale) above which a
#: model is said to separate too poorly (all-MiniLM-L6-v2: 0.26).
NOISY = 0.40
#: Noise past this is shown as this: the model cannot rank at all.
CAP = 9.99
#: Bumped whenever the measurement changes: older grades are measured again.
RECIPE = "pairs32-p99-v1"
_FILE = "grades.json"


@dataclass(frozen=True)
class Grade:
    """A model's separation of related from unrelated pairs (see the module's text)."""

    separation: float  # (related mean - unrelated mean) / unrelated standard deviation
    noise: float  # the unrelated pairs' 99th percentile, mapped onto the reference scale
    first: int  # questions whose own answer scores highest of the 32
    pairs: int

    @property
    def weak(self) -> bool:
        return self.noise > NOISY

    @property
    def shown(self) -> tuple[str, str]:
        """Separation and noise as ``model list`` shows them (noise capped at 9.99)."""
        return f"{round(self.separation, 1) or 0.0:.1f}", f"{self.noise:.2f}"

    def summary(self) -> str:
        separation, noise = self.shown
        beyond = " or beyond" if self.noise >= CAP else ""
        return (f"separation {separation}, noise at {noise}{beyond} on the reference "
                f"scale, {self.first}/{self.pairs} answers first")

    def warning(self, name: str) -> str | None:
        """The warning a weak model gets, naming the measurement; None for another."""
        if not self.weak:
            return None
        separation, noise = self.shown
        beyond = " or beyond" if self.noise >= CAP else ""
        return (f"model {name} separates related from unrelated text poorly: its "
                f"unrelated pairs reach {noise}{beyond} on the reference scale "
                f"(all-MiniLM-L6-v2: 0.26; warned above {NOISY:.2f}; separation "
                f"{separation} against 7.1): a default threshold cannot keep "
                "nonsense out of its listings")


def measure(encode_queries: Callable[[Sequence[str]], np.ndarray],
            encode_documents: Callable[[Sequence[str]], np.ndarray]) -> Grade:
    """The grade from the pairs' cosines (64 short texts)."""
    queries = encode_queries([q for q, _ in PAIRS]).astype(np.float64)
    passages = encode_documents([p for _, p in PAIRS]).astype(np.float64)
    queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
    passages /= np.maximum(np.linalg.norm(passages, axis=1, keepdims=True), 1e-12)
    cosines = queries @ passages.T
    related = np.diag(cosines)
    unrelated = cosines[~np.eye(len(PAIRS), dtype=bool)]
    gap = float(related.mean() - unrelated.mean())
    spread = max(float(unrelated.std()), 1e-9)
    # the scale's line, unbounded here: a model that cannot rank maps its noise far out
    gain = (RELATED_REF - UNRELATED_REF) / max(gap, 1e-9)
    noise = UNRELATED_REF + gain * (float(np.percentile(unrelated, 99)) - unrelated.mean())
    first = int(np.sum(np.argmax(cosines, axis=1) == np.arange(len(PAIRS))))
    return Grade(separation=round(gap / spread, 2), noise=round(min(float(noise), CAP), 3),
                 first=first, pairs=len(PAIRS))


def _key(spec: ModelSpec) -> str:
    return f"{spec.name}@{spec.digest}:{RECIPE}"


def _table() -> dict[str, dict]:
    try:
        table = json.loads((graphs_dir() / _FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def known(spec: ModelSpec) -> Grade | None:
    """The model's grade if it was measured (by ``model add`` or ``model list --grade``)."""
    held = _table().get(_key(spec))
    try:
        return Grade(**held) if isinstance(held, dict) else None
    except TypeError:
        return None


def grade(spec: ModelSpec) -> Grade:
    """The model's grade: known, or measured now (loading the model) and kept."""
    held = known(spec)
    if held is not None:
        return held
    embedder = Embedder(spec)
    measured = measure(embedder.encode_queries, embedder.encode)
    log.info("grade of %s: %s", spec.name, measured.summary())
    table = _table()
    table[_key(spec)] = asdict(measured)
    with contextlib.suppress(OSError):  # a read-only cache only costs measuring again
        graphs_dir().mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=graphs_dir(), prefix=".grades.")
        with os.fdopen(fd, "w") as out:
            json.dump(table, out)
        os.replace(partial, graphs_dir() / _FILE)
    return measured
