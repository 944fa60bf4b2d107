"""A model's scores put on the reference model's scale: the line the search applies.

Every tuned score of the search holds for all-MiniLM-L6-v2's spread of cosines; another
model's cosines are mapped onto it first, by ``score = gain * cosine + offset``. How the
line is measured is :mod:`.pairs`'; the store's model owns it (:mod:`.owner`); here is
only the line, as the index applies it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScoreScale:
    """``score = gain * cosine + offset``, applied to a query's vector scores."""

    gain: float = 1.0
    offset: float = 0.0
    unrelated: float | None = None  # this model's mean cosines, as measured
    related: float | None = None

    @property
    def identity(self) -> bool:
        return self.gain == 1.0 and self.offset == 0.0

    def scores(self, products: np.ndarray, weight: float) -> np.ndarray:
        """Mapped vector scores of ``products`` (cosines times the query's ``weight``,
        its familiarity, which scales the whole mapped score)."""
        if self.identity:
            return products
        return products * self.gain + self.offset * weight

    def product_at(self, score: float, weight: float) -> float:
        """The product a row needs for its mapped score to reach ``score``."""
        if self.identity:
            return score
        return (score - self.offset * weight) / self.gain


IDENTITY = ScoreScale()
