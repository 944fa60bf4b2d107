"""How well a model tells related from unrelated text: its grade, read from the pairs'
measurement (:mod:`.pairs`), and the warning a model gets that cannot separate them well
enough for a default threshold to keep nonsense out.

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
"""

from __future__ import annotations

from dataclasses import dataclass

#: Noise (the unrelated pairs' 99th percentile on the reference scale) above which a
#: model is said to separate too poorly (all-MiniLM-L6-v2: 0.26).
NOISY = 0.40
#: Noise past this is shown as this: the model cannot rank at all.
CAP = 9.99
#: The reference model's own grade, as the messages compare against it.
REFERENCE = "all-MiniLM-L6-v2: separation 7.1, noise at 0.26"


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

    @property
    def _beyond(self) -> str:
        return " or beyond" if self.noise >= CAP else ""

    def summary(self) -> str:
        separation, noise = self.shown
        return (f"separation {separation}, noise at {noise}{self._beyond} on the "
                f"reference scale, {self.first}/{self.pairs} answers first")

    def warning(self, name: str) -> str | None:
        """The warning a weak model gets, naming the measurement; None for another."""
        if not self.weak:
            return None
        separation, noise = self.shown
        return (f"model {name} separates related from unrelated text poorly: its "
                f"unrelated pairs reach {noise}{self._beyond} on the reference scale "
                f"(all-MiniLM-L6-v2: 0.26; warned above {NOISY:.2f}; separation "
                f"{separation} against 7.1): a default threshold cannot keep "
                "nonsense out of its listings")
