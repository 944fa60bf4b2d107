"""Where a listing stops being the answer, decided from that search's own scores.

The server default is a noise floor: it keeps gibberish out, but for a real query it only
says where noise begins, so a listing above it would fill its limit with everything
faintly related. A ranked list is cut where its scores fall away from the best one
(the "gap to the best" family of ranked-list truncation): every result within
``CUT_GAP`` of the top score is listed, and at most the listing size of its threshold
(exact 5, standard 12, comprehensive 25, as the search-intensity presets this project
descends from pair a threshold with a result count; ``presets.listing_size``). A narrow
query lists its few close matches; a broad or flat one lists up to its size.

The cut shapes every listing, whatever its threshold's source (inherited, a preset, an
explicit number, the auto-adjust): the threshold is its floor. So a higher threshold
never lists more: the matches above it are fewer, the best of them the same, and the
size never grows with the threshold. The one way to list everything above a threshold
is to write a number to ``.meta/limit`` (the plan's ``size`` is then None).

The gap is measured on each result's *reach*: its score against the query's own
threshold (its own term's score, or a union term's). For a single term that is the
ranking's score; a nested query ranks by its weakest level but is cut on its own term,
which keeps the cut monotonic there too.

Only the scores every search returns are used, so the cut is the same against the
embedded server and against the platform. The gap is a score difference chosen with
all-MiniLM-L6-v2: the embedded server maps every model's scores onto that model's scale
(``kg_fuse.server.store_model.scale``), so the gap means the same whatever model it serves.
The platform publishes no such scale; against it the gap falls back to the same 0.16 of
its raw scores, which suits models whose cosines spread as MiniLM's do (a model that
squeezes its cosines together lists more there, up to its listing size). The numbers
were chosen by ``kg-fuse eval`` over the judged development sets (docs/eval.md, "Sixth
round: where a listing stops").
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

#: How far below the best score a result may be and still be listed. Chosen on the
#: judged development halves and the expected-concept sets (docs/eval.md, "Where a
#: listing stops"): 0.16 is the widest gap whose median stdlib listing stays within 10
#: files (9); 0.12 gave judged precision 0.69 against 0.57 but lost the expected concept
#: of 7% more everyday queries, 0.20 kept 3 more files a query for 2.7% more of them.
CUT_GAP = 0.16


class CutReason(enum.Enum):
    NONE = "none"  # everything that reached the threshold is listed
    GAP = "gap"  # the scores fell more than CUT_GAP below the best
    SIZE = "size"  # the preset's listing size
    LIMIT = "limit"  # .meta/limit


@dataclass(frozen=True)
class Cut:
    """How much of a ranking is listed, and why the rest is not."""

    kept: int  # how many results are listed
    ranked: int  # how many reached every threshold (as far as they were fetched)
    reason: CutReason
    size: int | None = None  # the listing size in force (None: everything)
    best: float | None = None  # the top reach
    falls: tuple[float, float] | None = None  # the last listed reach, the best left out
    floor: float | None = None  # the lowest reach listed at most (None: no gap cut)

    def listed(self, reaches: Sequence[float]) -> list[int]:
        """The positions in the ranking that are listed: within the gap, in rank order,
        up to ``kept``."""
        return [i for i, reach in enumerate(reaches)
                if self.floor is None or reach >= self.floor][: self.kept]


def relevance_cut(reaches: Sequence[float], size: int | None, limit: int) -> Cut:
    """How many of a ranking to list, from each result's reach (in rank order, every
    result above the thresholds).

    ``size`` is the listing size of the query's threshold (None: ``.meta/limit`` was
    written, everything above the threshold); ``limit`` the query's ``.meta/limit``,
    never exceeded.
    """
    ranked = len(reaches)
    best = max(reaches) if reaches else None
    floor = None if size is None or best is None else best - CUT_GAP
    close = sum(1 for reach in reaches if floor is None or reach >= floor)
    cap = limit if size is None else min(size, limit)
    kept = min(cap, close)
    if size is None:  # a ranking fetched as deep as the limit may go on past it
        reason = CutReason.LIMIT if ranked >= limit else CutReason.NONE
    elif kept >= ranked:
        reason = CutReason.NONE
    elif kept == close and floor is not None:
        reason = CutReason.GAP
    elif size is not None and size <= limit:
        reason = CutReason.SIZE
    else:
        reason = CutReason.LIMIT
    cut = Cut(kept, ranked, reason, size, best, None, floor)
    listed = cut.listed(reaches)
    shown = set(listed)
    left = [reach for i, reach in enumerate(reaches) if i not in shown]
    falls = (reaches[listed[-1]], max(left)) if listed and left else None
    return Cut(kept, ranked, reason, size, best, falls, floor)
