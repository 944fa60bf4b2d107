"""The one place that answers "what threshold does this query use, and why".

Rules (ADR-508): a query without its own threshold inherits the server default, which
the client learns over HTTP and never hard-codes; a value written to ``.meta/threshold``
overrides it for that query alone; the zero-result auto-adjust at creation may lower an
over-tight threshold but never below the server default.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

INHERIT_WORDS = ("inherit", "default")
_NUMBER = re.compile(r"^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


class InvalidThreshold(ValueError):
    """Text that is not a threshold: the write is refused with EINVAL."""


class ThresholdSource(enum.Enum):
    OVERRIDE = "override"
    SERVER_DEFAULT = "server default"
    AUTO_ADJUSTED = "auto-adjusted"


@dataclass(frozen=True)
class AutoAdjustment:
    """What the creation-time probe changed: ``to_value`` None means back to inheriting."""

    from_value: float
    to_value: float | None
    suggested: float
    server_default: float


@dataclass(frozen=True)
class EffectiveThreshold:
    """The threshold a query searches with, and where it comes from.

    ``value`` is None only while the server default has never been learned.
    ``min_similarity`` is what a search sends: None means "omit the field".
    """

    value: float | None
    source: ThresholdSource
    min_similarity: float | None


def effective_threshold(
    own: float | None, auto_adjusted: AutoAdjustment | None, server_default: float | None
) -> EffectiveThreshold:
    if own is None:
        return EffectiveThreshold(server_default, ThresholdSource.SERVER_DEFAULT, None)
    if auto_adjusted is not None and auto_adjusted.to_value == own:
        return EffectiveThreshold(own, ThresholdSource.AUTO_ADJUSTED, own)
    return EffectiveThreshold(own, ThresholdSource.OVERRIDE, own)


def parse_threshold_value(token: str) -> float:
    """A number in [0, 1], written plainly (no NaN, infinity, sign or hex)."""
    shown = repr(token[:40] + ("..." if len(token) > 40 else ""))  # logs get a prefix
    if not _NUMBER.match(token):
        raise InvalidThreshold(f"not a number: {shown}")
    value = float(token)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidThreshold(f"out of range [0, 1]: {shown}")
    return value


def parse_threshold_file(data: bytes) -> float | None:
    """Parse what was written to ``.meta/threshold``: a number, or None for inherit.

    Comment lines (``#``) and blank lines are ignored, so saving the file unchanged
    from an editor keeps it inheriting. Empty means inherit.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidThreshold("not UTF-8 text") from None
    tokens: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            tokens.extend(stripped.split())
    if not tokens:
        return None
    if len(tokens) > 1:
        raise InvalidThreshold(f"expected one value, got {len(tokens)}")
    if tokens[0].lower() in INHERIT_WORDS:
        return None
    return parse_threshold_value(tokens[0])


def floor_adjust(typed: float, suggested: float, server_default: float) -> AutoAdjustment | None:
    """The creation-time auto-adjust for a query whose typed threshold found nothing.

    The new threshold is max(suggested, server default); when the floor binds
    (suggested <= default) the query goes back to inheriting. Returns None when the
    adjustment would not lower the threshold (it never raises one).
    """
    if max(suggested, server_default) >= typed:
        return None
    if suggested <= server_default:
        return AutoAdjustment(typed, None, suggested, server_default)
    return AutoAdjustment(typed, suggested, suggested, server_default)
