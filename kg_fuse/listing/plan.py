"""What one listing searches (a ``QueryPlan``), made from the thresholds that filter it.

A query is a chain of levels (a nested query's ancestors, then itself). Each level's term
is searched at that level's own effective threshold (``explain.py``) and restricted to
that level's ontologies (its scope or links, OR between links); union and exclude terms
are searched at the query's own threshold, exclude terms at the server default (so that
raising the query's threshold never excludes less). The plan's ``size`` is the own
threshold's listing size, where the cut stops at the latest (``cut.py``), or None when
``.meta/limit`` was written: every match above the threshold, up to the limit. Equal
plans give equal listings, so a plan is also what a held listing was fetched for.

How deep a term's ranking is fetched: a single term cut at its listing size needs only
that many matches and one more (the next score says where and why the cut stops:
``depth``); a written limit needs the limit; a nested query, union and exclude terms
need ``MAX_MATCHES`` of each term, since their intersections and unions go deeper than
any one term's listing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kg_fuse.limits import DEFAULT_LIMIT
from kg_fuse.listing.explain import Role, ThresholdExplanation
from kg_fuse.listing.thresholds import effective_threshold

MAX_MATCHES = 1000  # the most matches fetched for one term (intersections need depth)


@dataclass(frozen=True)
class Level:
    text: str
    min_similarity: float | None  # None: omit, the server default applies
    ontologies: tuple[str, ...] = ()  # empty: every ontology


@dataclass(frozen=True)
class QueryPlan:
    """Everything that decides a listing; equal plans give equal listings."""

    levels: tuple[Level, ...]
    limit: int
    union: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    size: int | None = None  # the threshold's listing size; None: all above it (the limit)

    @property
    def own(self) -> Level:
        return self.levels[-1]

    @property
    def single(self) -> bool:
        """One term alone: no enclosing level, union or exclude term."""
        return len(self.levels) == 1 and not self.union and not self.exclude

    @property
    def depth(self) -> int:
        """How many of the query's own term's best matches the listing fetches: for a
        single term cut at its listing size, the size and one more, all the cut reads
        (fetching the limit cost a search's answer four times the results for nothing
        listed); else the limit, or ``MAX_MATCHES`` where terms combine."""
        if not self.single:
            return max(MAX_MATCHES, self.limit)
        if self.size is None:
            return self.limit
        return min(self.size + 1, self.limit)


def plan_listing(explanation: ThresholdExplanation,
                 ontologies: Sequence[tuple[str, ...]], limit: int | None) -> QueryPlan:
    """The searches behind a listing: each level of the chain at the threshold the
    explanation gives it, in its ``ontologies`` (one tuple per level), and how far the
    ranking may be listed (``limit``: the one written to ``.meta/limit``, None when it
    was not: the threshold's listing size applies)."""
    levels = tuple(Level(level.text, level.effective.min_similarity, where)
                   for level, where in zip(explanation.chain, ontologies, strict=True))
    size = explanation.own.effective.listing_size if limit is None else None
    return QueryPlan(levels, limit or DEFAULT_LIMIT, explanation.terms(Role.UNION),
                     explanation.terms(Role.EXCLUDE), size)


def inheriting_plan(text: str, ontologies: tuple[str, ...], limit: int,
                    cut: bool = True) -> QueryPlan:
    """What a query directory that inherits the server default lists (``cut`` False:
    everything above the default, as an explicit threshold lists): what ``kg-fuse eval``
    measures."""
    inherited = effective_threshold(None, None, None)
    return QueryPlan((Level(text, inherited.min_similarity, ontologies),), limit,
                     size=inherited.listing_size if cut else None)
