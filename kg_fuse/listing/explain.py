"""The one answer to "which thresholds filter this listing, and why": every level of a
nested query and every union and exclude term, each with its threshold and where it
comes from (own value, preset, the server default and how it was learned, the stored
creation-time adjustment). ``plan.py`` searches with it; the ``.meta`` files show it.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kg_fuse.listing.presets import PRESET_OFFSETS
from kg_fuse.listing.thresholds import (
    AutoAdjustment,
    EffectiveThreshold,
    Threshold,
    ThresholdSource,
    effective_threshold,
)


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
    """What a filter level is to the query listed: a level of its chain (an enclosing
    query, or the query itself), or one of its union and exclude terms."""

    ENCLOSING = "enclosing query"
    OWN = "this query"
    UNION = "union term"
    EXCLUDE = "exclude term"

    @property
    def is_term(self) -> bool:
        """A union or exclude term (searched at the query's own threshold, and at the
        server default), not a level of the chain."""
        return self in (Role.UNION, Role.EXCLUDE)


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
    (the query itself last), then its union terms (searched at the query's own
    threshold) and its exclude terms (at the server default: a concept that really
    matches one is removed whatever the query's own threshold). A concept is listed when
    it reaches every level's threshold."""

    levels: tuple[FilterLevel, ...]
    default: DefaultOrigin

    @property
    def chain(self) -> tuple[FilterLevel, ...]:
        return tuple(lv for lv in self.levels if not lv.role.is_term)

    @property
    def own(self) -> FilterLevel:
        return next(lv for lv in self.levels if lv.role is Role.OWN)

    def terms(self, role: Role) -> tuple[str, ...]:
        """The union (or exclude) terms' texts, in order."""
        return tuple(lv.text for lv in self.levels if lv.role is role)


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
    levels += [FilterLevel(Role.UNION, term, own.owner, own.effective, own.adjustment)
               for term in union]
    inherited = effective_threshold(None, None, default.value, default.presets)
    levels += [FilterLevel(Role.EXCLUDE, term, own.owner, inherited, None)
               for term in exclude]
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
