"""Where a ranking stops being listed (``kg_fuse.listing.cut``), on the score shapes searches
give: a narrow query (a few close matches, then a drop), a broad one (many close
matches), a flat one (everything near the same score), and the edges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kg_fuse.listing.cut import CUT_GAP, CutReason, relevance_cut
from kg_fuse.listing.presets import PRESET_SIZES

STANDARD = PRESET_SIZES["standard"]

# the shapes of real searches of the test corpus (its first 14 scores, rounded)
NARROW = [0.91, 0.76, 0.72, 0.67, 0.65, 0.65, 0.63, 0.61, 0.60, 0.59, 0.59, 0.58, 0.57]
BROAD = [0.71, 0.69, 0.64, 0.64, 0.63, 0.63, 0.62, 0.62, 0.60, 0.60, 0.60, 0.58, 0.58]
FLAT = [0.52, 0.48, 0.48, 0.47, 0.47, 0.47, 0.46, 0.46, 0.46, 0.46, 0.46, 0.45, 0.45]


def test_a_narrow_ranking_stops_after_its_close_matches() -> None:
    cut = relevance_cut(NARROW, STANDARD, 50)
    assert cut.kept == 2  # 0.91 and 0.76; 0.72 is more than 0.16 below the best
    assert cut.reason is CutReason.GAP
    assert cut.falls == (0.76, 0.72)
    assert cut.best == 0.91


def test_a_broad_or_flat_ranking_lists_up_to_the_preset_size() -> None:
    for shape in (BROAD, FLAT):
        cut = relevance_cut(shape, STANDARD, 50)
        assert cut.kept == STANDARD
        assert cut.reason is CutReason.SIZE
        assert cut.falls == (shape[STANDARD - 1], shape[STANDARD])


def test_the_presets_sizes_bound_the_same_ranking() -> None:
    kept = {word: relevance_cut(FLAT * 3, size, 50).kept for word, size in
            PRESET_SIZES.items()}
    assert kept == {"exact": 5, "standard": 12, "comprehensive": 25}


def test_a_written_limit_lists_everything_up_to_it() -> None:
    cut = relevance_cut(NARROW, None, 50)
    assert (cut.kept, cut.reason, cut.falls) == (len(NARROW), CutReason.NONE, None)
    cut = relevance_cut(NARROW, None, 5)
    assert (cut.kept, cut.reason) == (5, CutReason.LIMIT)
    # a ranking fetched to the limit may go on past it
    assert relevance_cut(NARROW[:5], None, 5).reason is CutReason.LIMIT


def test_the_limit_wins_over_the_preset_size() -> None:
    cut = relevance_cut(FLAT, STANDARD, 3)
    assert (cut.kept, cut.reason) == (3, CutReason.LIMIT)


def test_nothing_or_one_match_is_listed_whole() -> None:
    assert relevance_cut([], STANDARD, 50).kept == 0
    assert relevance_cut([0.3], STANDARD, 50).reason is CutReason.NONE
    short = relevance_cut([0.8, 0.79], STANDARD, 50)
    assert (short.kept, short.reason) == (2, CutReason.NONE)


@given(st.lists(st.floats(0.0, 1.0), max_size=120).map(lambda s: sorted(s, reverse=True)),
       st.sampled_from([None, *PRESET_SIZES.values()]), st.integers(1, 1000))
def test_a_cut_keeps_a_prefix_within_its_bounds(scores: list[float], size: int | None,
                                                limit: int) -> None:
    cut = relevance_cut(scores, size, limit)
    assert 0 <= cut.kept <= min(len(scores), limit, size or limit)
    assert bool(scores) == (cut.kept > 0)  # a match is never cut away whole
    if size is not None and cut.kept:
        assert scores[cut.kept - 1] >= scores[0] - CUT_GAP  # nothing listed is far below
        if cut.reason is CutReason.GAP:
            assert scores[cut.kept] < scores[0] - CUT_GAP  # nor anything close left out


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 1.0)), max_size=60),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0),
       st.sampled_from(list(PRESET_SIZES.values())), st.integers(1, 200))
def test_a_higher_floor_never_lists_more(pairs: list[tuple[float, float]], low: float,
                                         high: float, size: int, limit: int) -> None:
    """A nested query ranks by its weakest level and is cut on its own term's score (its
    reach): whatever the two orders, raising the own threshold never lists more."""
    low, high = sorted((low, high))

    def listed(threshold: float) -> int:
        kept = [(weakest, reach) for weakest, reach in pairs if reach >= threshold]
        kept.sort(key=lambda p: -p[0])  # the ranking: by the weakest level
        return relevance_cut([reach for _, reach in kept], size, limit).kept

    assert listed(high) <= listed(low)
