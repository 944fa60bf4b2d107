"""Where a listing stops being the answer, decided from that search's own scores.

The server default is a noise floor: it keeps gibberish out, but for a real query it only
says where noise begins, so an inheriting listing would fill its limit with everything
faintly related. A ranked list is cut where its scores fall away from the best one
(the "gap to the best" family of ranked-list truncation): every result within
``CUT_GAP`` of the top score is listed, and at most the preset's listing size (exact 5,
standard 12, comprehensive 25, as the search-intensity presets this project descends
from pair a threshold with a result count). A narrow query lists its few close
matches; a broad or flat one lists up to its size.

Only the scores every search returns are used, so the cut is the same against the
embedded server and against the platform. The gap is a score difference chosen with
all-MiniLM-L6-v2: the embedded server maps every model's scores onto that model's scale
(``kg_fuse.server.search.scale``), so the gap means the same whatever model it serves.
The platform publishes no such scale; against it the gap falls back to the same 0.16 of
its raw scores, which suits models whose cosines spread as MiniLM's do (a model that
squeezes its cosines together lists more there, up to its listing size). The cut applies
to inheriting and preset thresholds; an explicit number written to ``.meta/threshold``
lists everything above it (up to ``.meta/limit``). The numbers were chosen by ``kg-fuse
eval`` over the judged development sets (docs/eval.md, "Sixth round: where a listing
stops").
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
    best: float | None = None  # the top score
    falls: tuple[float, float] | None = None  # the last listed score, the first left out


def relevance_cut(scores: Sequence[float], size: int | None, limit: int) -> Cut:
    """How many of ``scores`` (ranked, best first, all above the thresholds) to list.

    ``size`` is the listing size of the query's preset (None: an explicit threshold,
    everything above it); ``limit`` the query's ``.meta/limit``, never exceeded.
    """
    ranked = len(scores)
    if size is None:
        kept = min(ranked, limit)
        # a ranking as long as the limit was fetched to the limit: more may follow
        reason = CutReason.LIMIT if ranked >= limit else CutReason.NONE
    else:
        kept, reason = _close_to_the_best(scores, size, limit)
    falls = (scores[kept - 1], scores[kept]) if 0 < kept < ranked else None
    return Cut(kept, ranked, reason, size, scores[0] if scores else None, falls)


def _close_to_the_best(scores: Sequence[float], size: int, limit: int
                       ) -> tuple[int, CutReason]:
    """How many results are within ``CUT_GAP`` of the best, up to the size and the
    limit, and what stopped the listing there."""
    best = scores[0] if scores else None
    close = sum(1 for score in scores if best is not None and score >= best - CUT_GAP)
    kept = min(size, limit, close)
    if kept >= len(scores):
        return kept, CutReason.NONE
    if kept == close:
        return kept, CutReason.GAP
    return kept, CutReason.LIMIT if limit < size else CutReason.SIZE
