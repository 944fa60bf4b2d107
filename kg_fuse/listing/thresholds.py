"""The threshold rules (ADR-508): which threshold one query searches with.

- **Inherited**: a query without its own threshold inherits the server default, which
  the client learns over HTTP and never hard-codes: its searches omit
  ``min_similarity`` (:func:`effective_threshold`, ``SERVER_DEFAULT``).
- **Overridden**: a number written to ``.meta/threshold`` (or typed as ``NAME@0.8``)
  applies to that query alone (``OVERRIDE``).
- **Presets**: ``exact`` and ``comprehensive`` follow the default (``presets.py``);
  ``standard`` is inheriting.
- **Floored**: the zero-result auto-adjust at creation may lower an over-tight typed
  threshold, never below the server default (:func:`floor_adjust`).

How far a listing goes is ``cut.py``'s: every listing is cut where its scores fall away
from the best, at most at the size of the presets' band its threshold falls in
(``listing_size``), so a higher threshold, whatever its source, never lists more.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

from kg_fuse.listing.presets import (
    BELOW_NOISE_FLOOR,
    PRESET_OFFSETS,
    PRESET_SIZES,
    PRESET_WORDS,
    STANDARD,
    listing_size,
    preset_value,
)

INHERIT_WORDS = ("inherit", "default")

#: What a query stores: a number, a preset word ("exact"/"comprehensive"), or None.
Threshold = float | str | None
_NUMBER = re.compile(r"^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


class InvalidThreshold(ValueError):
    """Text that is not a threshold: a write is refused with EINVAL."""


def parse_threshold_value(token: str) -> float:
    """A number in [0, 1], written plainly (no NaN, infinity, sign or hex)."""
    shown = repr(token[:40] + ("..." if len(token) > 40 else ""))  # logs get a prefix
    if not _NUMBER.match(token):
        raise InvalidThreshold(f"not a number: {shown}")
    value = float(token)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidThreshold(f"out of range [0, 1]: {shown}")
    return value


def parse_preset(token: str) -> Threshold:
    """A preset word (any case) as stored: 'exact'/'comprehensive', or None for
    'standard'; raises InvalidThreshold for anything else."""
    word = token.strip().lower()
    if word == STANDARD:
        return None
    if word in PRESET_OFFSETS:
        return word
    raise InvalidThreshold(f"not a preset: {token!r}")


def parse_threshold(token: str) -> Threshold:
    """One written threshold: an inherit word (None), a preset word, or a number."""
    if token.lower() in INHERIT_WORDS:
        return None
    if token.lower() in PRESET_WORDS:
        return parse_preset(token)
    return parse_threshold_value(token)


@dataclass(frozen=True)
class AutoAdjustment:
    """What the creation-time probe changed: ``to_value`` None means back to inheriting."""

    from_value: float
    to_value: float | None
    suggested: float
    server_default: float


class ThresholdSource(enum.Enum):
    """Where a query's threshold comes from: :func:`effective_threshold` picks one."""

    OVERRIDE = "override"
    PRESET = "preset"
    SERVER_DEFAULT = "server default"
    AUTO_ADJUSTED = "auto-adjusted"


@dataclass(frozen=True)
class EffectiveThreshold:
    """The threshold a query searches with, and where it comes from.

    ``value`` is None only while the server default has never been learned.
    ``min_similarity`` is what a search sends: None means "omit the field".
    """

    value: float | None
    source: ThresholdSource
    min_similarity: float | None
    preset: str | None = None
    listing_size: int = PRESET_SIZES[STANDARD]  # the most it lists (presets.listing_size)

    @property
    def described(self) -> str:
        """'preset exact' / 'server default' / ... for status lines."""
        return f"preset {self.preset}" if self.preset else self.source.value

    @property
    def may_list_noise(self) -> bool:
        return self.preset == BELOW_NOISE_FLOOR


def effective_threshold(
    own: Threshold, auto_adjusted: AutoAdjustment | None, server_default: float | None,
    presets: dict[str, float] | None = None,
) -> EffectiveThreshold:
    """A preset follows the default; no value of its own inherits it (the search omits
    the field); a stored auto-adjustment or an own value overrides it."""
    if isinstance(own, str):
        # Until the default is learned the search omits the field (server default).
        value = preset_value(own, server_default, presets)
        return EffectiveThreshold(value, ThresholdSource.PRESET, value, own,
                                  PRESET_SIZES[own])
    if own is None:
        return EffectiveThreshold(server_default, ThresholdSource.SERVER_DEFAULT, None)
    size = listing_size(own, server_default, presets)
    if auto_adjusted is not None:  # the stored record: cleared by any later write
        return EffectiveThreshold(own, ThresholdSource.AUTO_ADJUSTED, own, listing_size=size)
    return EffectiveThreshold(own, ThresholdSource.OVERRIDE, own, listing_size=size)


def auto_adjustable(threshold: Threshold) -> bool:
    """Whether a new query's threshold may be auto-adjusted at creation: a typed number
    only (a preset follows the default; an inheriting query has nothing to lower)."""
    return isinstance(threshold, float)


def floor_adjust(typed: float, suggested: float, server_default: float | None
                 ) -> AutoAdjustment | None:
    """The creation-time auto-adjust for a query whose typed threshold found nothing.

    The new threshold is max(suggested, server default); when the floor binds
    (suggested <= default) the query goes back to inheriting. Returns None when the
    adjustment would not lower the threshold (it never raises one), and while the
    default is unknown (the query stays as typed: no floor, no adjustment).
    """
    if server_default is None or max(suggested, server_default) >= typed:
        return None
    if suggested <= server_default:
        return AutoAdjustment(typed, None, suggested, server_default)
    return AutoAdjustment(typed, suggested, suggested, server_default)
