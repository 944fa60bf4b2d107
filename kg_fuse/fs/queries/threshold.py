"""The one place that answers "which thresholds filter this listing, and why".

Rules (ADR-508): a query without its own threshold inherits the server default, which
the client learns over HTTP and never hard-codes; a value written to ``.meta/threshold``
overrides it for that query alone; the zero-result auto-adjust at creation may lower an
over-tight threshold but never below the server default.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kg_fuse.fs.kernel.errnos import Invalid

INHERIT_WORDS = ("inherit", "default")
STANDARD = "standard"  # the preset that means inherit
#: Intensity presets (ChromaDB's idea, relative to the calibrated default instead of
#: fixed numbers). The server publishes their values with its default, derived from its
#: calibration; a server that does not gets the default plus these offsets. Either way a
#: preset follows the default. ``comprehensive`` goes below the default, i.e. below the
#: noise floor: its extra results may be noise.
PRESET_OFFSETS: dict[str, float] = {"exact": 0.10, "comprehensive": -0.06}
PRESET_WORDS = ("exact", STANDARD, "comprehensive")
#: The most results a listing at each preset shows, before its relevance cut stops it
#: earlier (``cut.py``): the presets pair a threshold with a result count, as ChromaDB's
#: exact 5 / standard 12 / comprehensive 25 do. An explicit threshold has no size: it
#: lists everything above it, up to ``.meta/limit``.
PRESET_SIZES: dict[str, int] = {"exact": 5, STANDARD: 12, "comprehensive": 25}
BELOW_NOISE_FLOOR = "comprehensive"

#: What a query stores: a number, a preset word ("exact"/"comprehensive"), or None.
Threshold = float | str | None
_NUMBER = re.compile(r"^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


class InvalidThreshold(Invalid):
    """Text that is not a threshold: the write is refused with EINVAL."""


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
    preset: str | None = None

    @property
    def described(self) -> str:
        """'preset exact' / 'server default' / ... for status lines."""
        return f"preset {self.preset}" if self.preset else self.source.value

    @property
    def listing_size(self) -> int | None:
        """How many results the listing shows at most before its relevance cut: the
        preset's size for an inheriting or preset threshold, None (everything above
        it) for an explicit one."""
        if self.source is ThresholdSource.SERVER_DEFAULT:
            return PRESET_SIZES[STANDARD]
        return PRESET_SIZES[self.preset] if self.preset else None

    @property
    def may_list_noise(self) -> bool:
        return self.preset == BELOW_NOISE_FLOOR


def preset_value(word: str, server_default: float | None,
                 published: dict[str, float] | None = None) -> float | None:
    """A preset's current value: as the server published it with its default, else the
    server default plus the preset's offset, within [0, 1]."""
    if server_default is None:
        return None
    if published and word in published:
        return published[word]
    return round(min(1.0, max(0.0, server_default + PRESET_OFFSETS[word])), 2)


class ThresholdSource(enum.Enum):
    """Where a query's threshold comes from: :func:`effective_threshold` picks one."""

    OVERRIDE = "override"
    PRESET = "preset"
    SERVER_DEFAULT = "server default"
    AUTO_ADJUSTED = "auto-adjusted"


def effective_threshold(
    own: Threshold, auto_adjusted: AutoAdjustment | None, server_default: float | None,
    presets: dict[str, float] | None = None,
) -> EffectiveThreshold:
    if isinstance(own, str):
        # Until the default is learned the search omits the field (server default).
        value = preset_value(own, server_default, presets)
        return EffectiveThreshold(value, ThresholdSource.PRESET, value, own)
    if own is None:
        return EffectiveThreshold(server_default, ThresholdSource.SERVER_DEFAULT, None)
    if auto_adjusted is not None:  # the stored record: cleared by any later write
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


def parse_preset(token: str) -> Threshold:
    """A preset word (any case) as stored: 'exact'/'comprehensive', or None for
    'standard'; raises InvalidThreshold for anything else."""
    word = token.strip().lower()
    if word == STANDARD:
        return None
    if word in PRESET_OFFSETS:
        return word
    raise InvalidThreshold(f"not a preset: {token!r}")


def parse_threshold_file(data: bytes) -> Threshold:
    """Parse what was written to ``.meta/threshold``: a number, a preset word
    (``exact``, ``standard`` = inherit, ``comprehensive``), or None for inherit.

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
    if tokens[0].lower() in PRESET_WORDS:
        return parse_preset(tokens[0])
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


# -- which thresholds filter a listing, and why ----------------------------------------------


class LevelSettings(Protocol):
    """What a level of a query chain contributes (a ``SavedQuery`` is one)."""

    @property
    def key(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def threshold(self) -> Threshold: ...
    @property
    def auto_adjusted(self) -> AutoAdjustment | None: ...


@dataclass(frozen=True)
class DefaultOrigin:
    """The server default as the client knows it: its value, how it was learned
    (``the epoch poll``, ``the admin endpoint``, ``an inheriting search``, ``a probe
    search``, ``saved by an earlier mount``) and when (wall clock), None while never
    learned."""

    value: float | None
    how: str | None = None
    at_wall: float | None = None
    presets: dict[str, float] | None = None  # as the server published them, if it does


class Role(enum.Enum):
    ENCLOSING = "enclosing query"
    OWN = "this query"
    UNION = "union term"
    EXCLUDE = "exclude term"


@dataclass(frozen=True)
class FilterLevel:
    """One threshold a listing is filtered by: which term, whose setting, the value."""

    role: Role
    text: str
    owner: str  # the key of the query whose setting applies
    effective: EffectiveThreshold
    adjustment: AutoAdjustment | None  # the creation-time auto-adjustment, if in effect


@dataclass(frozen=True)
class ThresholdExplanation:
    """Every threshold that filters one listing: the chain's levels, outermost first
    (the query itself last), then its union and exclude terms (searched at the query's
    own threshold). A concept is listed when it reaches every level's threshold."""

    levels: tuple[FilterLevel, ...]
    default: DefaultOrigin

    @property
    def chain(self) -> tuple[FilterLevel, ...]:
        return tuple(lv for lv in self.levels if lv.role in (Role.ENCLOSING, Role.OWN))

    @property
    def own(self) -> FilterLevel:
        return next(lv for lv in self.levels if lv.role is Role.OWN)


def explain_thresholds(chain: Sequence[LevelSettings], union: Sequence[str],
                       exclude: Sequence[str], default: DefaultOrigin
                       ) -> ThresholdExplanation:
    """The one answer to "which thresholds filter this listing, and why". ``chain`` is
    the query's enclosing queries, outermost first, then the query itself."""
    levels = []
    for depth, query in enumerate(chain):
        effective = effective_threshold(query.threshold, query.auto_adjusted, default.value,
                                        default.presets)
        role = Role.OWN if depth == len(chain) - 1 else Role.ENCLOSING
        levels.append(FilterLevel(role, query.text, query.key, effective,
                                  query.auto_adjusted))
    own = levels[-1]
    for role, terms in ((Role.UNION, union), (Role.EXCLUDE, exclude)):
        levels += [FilterLevel(role, term, own.owner, own.effective, own.adjustment)
                   for term in terms]
    return ThresholdExplanation(tuple(levels), default)


def _number(value: float | None) -> str:
    return "unknown (server not reached yet)" if value is None else repr(float(value))


def describe_default(default: DefaultOrigin) -> str:
    """'0.55 (from the admin endpoint, 2026-01-01T10:00:00+00:00)'."""
    if default.value is None:
        return _number(None)
    origin = [default.how] if default.how else []
    if default.at_wall is not None:
        origin.append(dt.datetime.fromtimestamp(default.at_wall, dt.UTC)
                      .replace(microsecond=0).isoformat())
    return _number(default.value) + (f" (from {', '.join(origin)})" if origin else "")


def describe_source(level: FilterLevel, default: DefaultOrigin, origin: bool = True) -> str:
    """Where a level's threshold comes from, in words (``origin``: with how and when the
    server default was learned)."""
    effective, adj = level.effective, level.adjustment
    if effective.preset is not None and default.presets \
            and effective.preset in default.presets:
        text = f"preset {effective.preset} (published by the server with its default)"
    elif effective.preset is not None:
        offset = PRESET_OFFSETS[effective.preset]
        text = (f"preset {effective.preset}: server default "
                f"{'+' if offset > 0 else '-'} {abs(offset):.2f}")
    elif effective.source is ThresholdSource.SERVER_DEFAULT:
        text = f"server default {describe_default(default)}" if origin else "server default"
    else:
        text = "own value"
    if adj is not None:
        to = "inherit" if adj.to_value is None else _number(adj.to_value)
        text += (f"; auto-adjusted at creation from {_number(adj.from_value)} to {to} "
                 f"(server suggested {_number(adj.suggested)}, default then "
                 f"{_number(adj.server_default)})")
    return text
