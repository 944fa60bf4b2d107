"""What ``.meta/status`` says of a listing in words: counts as a person writes them,
where the listing stopped and what stopped it (``kg_fuse.listing.cut``), why an empty one is
empty, and how to see more, offered only where it would list more.

Pure functions of the listing (``ResultSet``: its plan, cut, counts and the server's
hints), so a listing fetched for earlier settings is described by its own plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from kg_fuse.limits import MAX_LIMIT
from kg_fuse.listing.cut import CUT_GAP, Cut, CutReason
from kg_fuse.listing.presets import PRESET_SIZES

if TYPE_CHECKING:
    from kg_fuse.fs.queries.state import ResultSet
    from kg_fuse.listing.execute import LevelCount
    from kg_fuse.listing.plan import QueryPlan


def format_threshold(value: float) -> str:
    """The shortest text that reads back as exactly this value (so an unchanged save
    from an editor never alters it)."""
    return repr(float(value))


def one_line(text: str) -> str:
    """Text as one line of a ``key: value`` file (a label may hold newlines)."""
    return " ".join(text.split())


def counted(n: int, one: str, many: str) -> str:
    """'1 match', '2 matches': a count the way a person writes it."""
    return f"{n} {one if n == 1 else many}"


def matches_text(count: LevelCount) -> str:
    """'12 matches', or 'at least 13 matches' for a term whose ranking goes on past the
    depth the listing fetched (a count the status cannot know is never claimed)."""
    return ("at least " if count.more else "") + counted(count.matches, "match", "matches")


def own_count(results: ResultSet) -> LevelCount | None:
    """The count of the query's own term in the last listing (None: not fetched)."""
    plan, counts = results.plan, results.levels
    return counts[len(plan.levels) - 1] if len(counts) >= len(plan.levels) else None


def _places(*holds: Callable[[int], bool]) -> int | None:
    """The fewest decimals (2 to 4) at which rounded scores still show what ``holds``
    (a fall of 0.00 between two listed scores is no fall); None if none do."""
    return next((d for d in (2, 3, 4) if all(check(d) for check in holds)), None)


def _scaled(value: float, places: int) -> int:
    """A score rounded to ``places`` decimals, as an integer (exact comparisons)."""
    return round(value * 10**places)


def _gap_text(cut: Cut) -> str:
    """'the score falls from 0.76 to 0.72, more than 0.16 below the best (0.91)': the
    scores at the cut, to as many places as show that they are true."""
    assert cut.falls is not None and cut.best is not None
    last, first, best = *cut.falls, cut.best

    def below(d: int) -> bool:  # the first left out, shown more than the gap below the best
        return _scaled(best, d) - _scaled(first, d) > _scaled(CUT_GAP, d)

    def falls(d: int) -> bool:
        return _scaled(last, d) > _scaled(first, d)

    d = _places(below, falls)
    if d is not None:
        return (f"the score falls from {last:.{d}f} to {first:.{d}f}, more than {CUT_GAP} "
                f"below the best ({best:.{d}f})")
    d = _places(below) or 4
    return f"the next match scores {first:.{d}f}, more than {CUT_GAP} below the best ({best:.{d}f})"


def _within_text(cut: Cut) -> str:
    """'the next match scores 0.72, within 0.16 of the best (0.80)': a size or a limit
    stopped a listing whose scores had not fallen away yet."""
    assert cut.falls is not None and cut.best is not None
    first, best = cut.falls[1], cut.best
    d = _places(lambda d: _scaled(best, d) - _scaled(first, d)
                <= _scaled(CUT_GAP, d)) or 4
    return f"the next match scores {first:.{d}f}, within {CUT_GAP} of the best ({best:.{d}f})"


def _empty(results: ResultSet) -> bool:
    return results.cut.kept == 0 if results.cut is not None else not results.files


def _preset_of(size: int) -> str:
    return next((word for word, n in PRESET_SIZES.items() if n == size), "preset")


def cut_text(results: ResultSet) -> str | None:
    """Where the listing stopped and what stopped it: the score gap, the preset's size or
    ``.meta/limit``; for an empty listing, why nothing is listed."""
    cut, plan = results.cut, results.plan
    if _empty(results):
        return empty_text(results)
    if cut is None:
        return None
    found = _found(results)
    if cut.reason is CutReason.NONE:
        return (f"none: all {found} within {CUT_GAP} of the best score are listed"
                if plan.size is not None else
                "none: .meta/limit is written, so every match above the threshold is "
                "listed")
    return f"after {cut.kept} of {found} matches: {_stopped_by(cut, plan)}"


def _found(results: ResultSet) -> str:
    """How many matches reached every threshold: 'at least N' for a single term whose
    ranking goes on past the depth fetched (its listing size and one more)."""
    assert results.cut is not None
    own = own_count(results)
    more = results.plan.single and own is not None and own.more
    return f"at least {results.cut.ranked}" if more else str(results.cut.ranked)


def _stopped_by(cut: Cut, plan: QueryPlan) -> str:
    """What stopped a listing that was cut: the limit, the preset's size or the gap."""
    limit = f".meta/limit is {plan.limit}"
    if cut.reason is CutReason.LIMIT:
        within = f"; {_within_text(cut)}" if plan.size and cut.falls else ""
        return f"{limit}{within}"
    assert plan.size is not None
    size = f"the {_preset_of(plan.size)} listing size is {plan.size}"
    if cut.reason is CutReason.SIZE:
        return f"{size}; {_within_text(cut)}"
    if cut.kept == min(plan.size, plan.limit):  # the size (or limit) stops it here too
        return f"{_gap_text(cut)}; {limit if plan.limit < plan.size else size} too"
    return _gap_text(cut)


def empty_text(results: ResultSet) -> str:
    """Why a listing is empty: nothing reached the query's threshold (and the best score
    below it, as far as the server said), or the enclosing levels or the exclude terms
    left nothing."""
    response, counts = results.response, results.levels
    own = own_count(results)
    if own is not None and own.matches:
        removed = sum(c.changed for c in counts if c.role == "exclude")
        if removed:
            return f"nothing listed: the exclude terms removed every match ({removed})"
        return (f"nothing listed: none of this query's {counted(own.matches, 'match', 'matches')}"
                " reaches every enclosing level's threshold (see filtered by)")
    if own is not None and own.outside:
        return f"nothing listed: {scope_text(own)}"
    why = (f"nothing listed: no concept reached the threshold "
           f"{format_threshold(response.threshold_used)}")
    if response.near_misses:
        label, score = response.near_misses[0]
        return f"{why}; the best scored {score:.4f} ({one_line(label)})"
    if response.top_match is not None:
        top = response.top_match
        return f"{why}; the best scored {top.score:.4f} ({one_line(top.label)})"
    return f"{why}; the server reported no near miss"


def scope_text(count: LevelCount) -> str:
    """'3 matches reach the threshold, none of them in Kitchen': what a scope (an
    ontology directory, links) removed from a term that matched elsewhere."""
    where = " or ".join(count.scope) or "the scope"
    many = "at least " if count.outside >= 100 else ""
    return (f"{many}{counted(count.outside, 'match', 'matches')} of "
            f"{one_line(count.text)!r} reach the threshold, none of them in {where}")


def _next_below(results: ResultSet) -> float | None:
    """The best score the server named below the threshold (its near misses, its top
    match), for a single term's listing, whose ranking scores are those same scores."""
    plan, response = results.plan, results.response
    if len(plan.levels) != 1 or plan.union or plan.exclude:
        return None
    scores = [score for _, score in response.near_misses]
    if response.top_match is not None:
        scores.append(response.top_match.score)
    below = [score for score in scores if score < response.threshold_used]
    return max(below, default=None)


def _lower_threshold_text(results: ResultSet, value: float | None,
                          comprehensive: float | None) -> str | None:
    """Where every match above the threshold is listed (no cut) and the server named a
    match below it that would be listed, close enough to the best: the lower threshold
    that lists it (``comprehensive`` when that reaches it)."""
    cut, below = results.cut, _next_below(results)
    if cut is None or cut.best is None or value is None or results.plan.size is None:
        return None
    if below is None:  # the server named nothing below: a lower threshold may list more
        if comprehensive is None or comprehensive >= value:
            return None
        return (f"echo comprehensive > .meta/threshold searches down to "
                f"{format_threshold(comprehensive)} and may list more (up to "
                f"{PRESET_SIZES['comprehensive']}; below the default, some may be noise)")
    best = cut.best
    if below < best - CUT_GAP:  # the best below is too far below: none would be listed
        return None
    d = _places(lambda d: _scaled(below, d) < _scaled(value, d),
                lambda d: _scaled(best, d) - _scaled(below, d) <= _scaled(CUT_GAP, d)) or 4
    found = (f"a lower threshold lists more: the next match scores {below:.{d}f}, below "
             f"{format_threshold(value)} and within {CUT_GAP} of the best ({best:.{d}f})")
    if comprehensive is not None and below >= comprehensive and comprehensive < value:
        return (f"{found}; echo comprehensive > .meta/threshold "
                f"({format_threshold(comprehensive)}) lists it")
    return f"{found}; echo {just_below(below)} > .meta/threshold lists it"


def just_below(score: float) -> str:
    """A threshold (two decimals) that lists a match of this score: rounded down."""
    return format_threshold(max(0.0, math.floor(score * 100 + 1e-9) / 100))


def more_text(results: ResultSet, value: float | None,
              comprehensive: float | None = None) -> str | None:
    """How to list more, only where it would: past the score gap or the size, a written
    ``.meta/limit`` lists every match above the threshold (a larger preset lists nothing
    more past the gap: the rest score far below the best at any threshold); past a size,
    a larger preset too; past the limit, a larger limit. Where nothing was cut, a lower
    threshold: the one that lists the match the server named below this one, if it is
    close enough to the best to be listed (none if it is not); ``comprehensive`` as what
    may list more where the server named none (it names them only for a short page)."""
    cut, limit = results.cut, results.plan.limit
    if cut is None or _empty(results):
        return None
    if cut.reason is CutReason.NONE:
        return _lower_threshold_text(results, value, comprehensive)
    if cut.reason is CutReason.LIMIT or cut.kept >= limit:
        return (f"write a larger number (up to {MAX_LIMIT}) to .meta/limit"
                if limit < MAX_LIMIT else None)
    above = "the threshold" if value is None else f"the threshold {format_threshold(value)}"
    more = (f"write a number (up to {MAX_LIMIT}) to .meta/limit to list every match above "
            f"{above}, up to that many")
    wider = min(max(PRESET_SIZES.values()), limit)
    if cut.reason is CutReason.SIZE and wider > cut.kept:
        more += f", or comprehensive for up to {wider}"
    return more
