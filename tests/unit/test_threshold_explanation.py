"""One function answers "which thresholds filter this listing, and why": every level of a
nested query, union and exclude terms, each with its source; the search plan and the
``.meta`` files use that one answer."""

from __future__ import annotations

import tomllib
from pathlib import Path

from kg_fuse.client.api import KgApiClient
from kg_fuse.client.credentials import Credentials
from kg_fuse.client.models import SearchResponse
from kg_fuse.fs.queries.planner import Planner
from kg_fuse.fs.queries.registry import QueryRegistry
from kg_fuse.fs.queries.saved import QueryStore, SavedQuery, StoreState, _query_from_toml
from kg_fuse.fs.queries.servers import Opened, identify
from kg_fuse.fs.queries.state import ResultSet
from kg_fuse.fs.queries.watcher import ServerWatcher
from kg_fuse.fs.tree.meta.status import query_toml, status_file, threshold_file
from kg_fuse.listing.cut import relevance_cut
from kg_fuse.listing.execute import LevelCount
from kg_fuse.listing.explain import DefaultOrigin, Role, describe_source, explain_thresholds
from kg_fuse.listing.plan import Level, QueryPlan, inheriting_plan
from kg_fuse.listing.presets import PRESET_SIZES
from kg_fuse.listing.thresholds import AutoAdjustment, ThresholdSource

ADMIN = DefaultOrigin(0.5, "the admin endpoint", 1_700_000_000.0)
PARENT = SavedQuery(("compress data with gzip",), "compress data with gzip", threshold=0.7)
CHILD = SavedQuery(("compress data with gzip", "read"), "read")


def plan_of(explanation, limit: int = 50, written: bool = False) -> QueryPlan:
    """The plan a listing of these settings was fetched with (its own level's size; none
    when ``.meta/limit`` was ``written``)."""
    return QueryPlan(tuple(Level(lv.text, lv.effective.min_similarity)
                           for lv in explanation.chain), limit,
                     size=None if written else explanation.own.effective.listing_size)


def status(query: SavedQuery, explanation, counts: tuple[LevelCount, ...]) -> dict[str, str]:
    response = SearchResponse(query.text, (), 0.5, None, None, None)
    listing = ResultSet(plan_of(explanation), response, 0.0, 0.0, levels=counts)
    text = status_file(query, explanation, listing, None).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


def test_every_level_of_a_nested_query_is_explained_with_its_source() -> None:
    explained = explain_thresholds([PARENT, CHILD], (), (), ADMIN)
    parent, child = explained.levels
    assert (parent.role, parent.owner, parent.effective.value) == (
        Role.ENCLOSING, "compress data with gzip", 0.7)
    assert parent.effective.source is ThresholdSource.OVERRIDE
    assert (child.role, child.effective.value) == (Role.OWN, 0.5)
    assert child.effective.source is ThresholdSource.SERVER_DEFAULT
    assert explained.own is child
    source = describe_source(child, ADMIN)
    assert source.startswith("server default 0.5 (from the admin endpoint, 2023-11-14T")
    assert describe_source(parent, ADMIN) == "own value"


def test_union_terms_follow_the_query_s_threshold_and_exclude_terms_the_default() -> None:
    """An exclude term at the query's own threshold would exclude less as the threshold
    rises, and a stricter query could list more (issue 39): it is at the default."""
    query = SavedQuery(("q",), "q", threshold="exact", union=("u",), exclude=("x",))
    explained = explain_thresholds([query], query.union, query.exclude, ADMIN)
    assert [lv.role for lv in explained.levels] == [Role.OWN, Role.UNION, Role.EXCLUDE]
    assert [lv.effective.value for lv in explained.levels] == [0.6, 0.6, 0.5]
    assert describe_source(explained.levels[1], ADMIN) == "preset exact: server default + 0.10"
    assert describe_source(explained.levels[2], ADMIN, origin=False) == "server default"


def test_the_stored_auto_adjustment_is_the_source_not_a_float_comparison() -> None:
    adjusted = AutoAdjustment(0.95, 0.6, 0.6, 0.5)
    query = SavedQuery(("q",), "q", threshold=0.6, auto_adjusted=adjusted)
    level = explain_thresholds([query], (), (), ADMIN).own
    assert level.effective.source is ThresholdSource.AUTO_ADJUSTED
    assert "auto-adjusted at creation from 0.95 to 0.6" in describe_source(level, ADMIN)
    back = SavedQuery(("q",), "q", auto_adjusted=AutoAdjustment(0.95, None, 0.4, 0.5))
    level = explain_thresholds([back], (), (), ADMIN).own
    assert level.effective.source is ThresholdSource.SERVER_DEFAULT
    assert "auto-adjusted at creation from 0.95 to inherit" in describe_source(level, ADMIN)
    assert query.with_threshold(0.6).auto_adjusted is None  # a later write: own value


def test_a_record_that_no_longer_matches_the_stored_threshold_is_dropped_on_load() -> None:
    raw = {"path": ["q"], "text": "q", "threshold": 0.8,
           "auto_adjusted": {"from": 0.95, "to": 0.6, "suggested": 0.6, "server_default": 0.5}}
    assert _query_from_toml(raw).auto_adjusted is None
    raw["threshold"] = 0.6
    assert _query_from_toml(raw).auto_adjusted == AutoAdjustment(0.95, 0.6, 0.6, 0.5)


def test_status_of_an_empty_nested_query_names_the_parent_threshold_as_the_filter() -> None:
    explained = explain_thresholds([PARENT, CHILD], (), (), ADMIN)
    counts = (LevelCount("level", PARENT.text, 12, 40), LevelCount("level", CHILD.text, 40))
    lines = status(CHILD, explained, counts)
    assert lines["filtered by"] == ("level 1, the enclosing query 'compress data with gzip' "
                                    "at 0.7 (override): none of this query's 40 matches "
                                    "reach it")
    assert lines["level 1"] == ("0.7 (own value) for 'compress data with gzip', the "
                                "enclosing query 'compress data with gzip'; 12 matches, 40 "
                                "of this query's matches not among them")
    assert lines["level 2"] == "0.5 (server default) for 'read', this query; 40 matches"
    assert lines["server default"].startswith("0.5 (from the admin endpoint, 2023-11-14T")
    assert lines["effective threshold"] == "0.5 (server default)"


def test_filtered_by_counts_the_matches_that_reach_the_enclosing_level() -> None:
    explained = explain_thresholds([PARENT, CHILD], (), (), ADMIN)
    counts = (LevelCount("level", PARENT.text, 50, 83), LevelCount("level", CHILD.text, 98))
    assert status(CHILD, explained, counts)["filtered by"].endswith(
        ": 15 of this query's 98 matches reach it")  # 83 removed, 15 left


def test_status_names_the_own_threshold_when_nothing_reaches_it() -> None:
    explained = explain_thresholds([CHILD], (), (), ADMIN)
    lines = status(CHILD, explained, (LevelCount("level", CHILD.text, 0),))
    assert lines["filtered by"] == ("this query's threshold 0.5 (server default): "
                                    "no concept matches 'read' at it")


def test_union_and_exclude_effects_show_in_the_status() -> None:
    query = SavedQuery(("q",), "q", union=("u",), exclude=("x",))
    explained = explain_thresholds([query], query.union, query.exclude, ADMIN)
    counts = (LevelCount("level", "q", 10), LevelCount("union", "u", 5, 3),
              LevelCount("exclude", "x", 7, 2))
    lines = status(query, explained, counts)
    assert lines["union 'u'"] == ("0.5 (server default), this query's threshold; "
                                  "5 matches, 3 added")
    assert lines["exclude 'x'"].endswith("; 7 matches, 2 removed")
    assert "filtered by" not in lines


def test_query_toml_and_threshold_file_show_each_level() -> None:
    explained = explain_thresholds([PARENT, CHILD], (), (), ADMIN)
    doc = tomllib.loads(query_toml(CHILD, explained).decode())
    assert [(lv["role"], lv["threshold"], lv["source"]) for lv in doc["levels"]] == [
        ("enclosing query", 0.7, "override"), ("this query", 0.5, "server default")]
    assert doc["server_default_learned"].startswith("0.5 (from the admin endpoint")
    text = threshold_file(CHILD, explained).decode()
    assert ("# Also filtered by the enclosing query 'compress data with gzip': 0.7 "
            "(override)") in text
    assert text.splitlines()[-1] == "inherit"


def test_the_plan_searches_each_level_at_its_explained_threshold(tmp_path: Path) -> None:
    state = StoreState({q.key: q for q in (PARENT, CHILD)}, server_default_seen=0.5)
    client = KgApiClient("http://127.0.0.1:9", Credentials("id", "secret", "test"))
    registry = QueryRegistry(Opened(identify("http://127.0.0.1:9", None), QueryStore(tmp_path),
                                    state))
    watcher = ServerWatcher(client, ttl=60, initial=state.server_default_seen)
    planner = Planner(client, registry, watcher)
    plan = planner.plan(CHILD)
    explained = planner.explain(CHILD)
    assert [lv.min_similarity for lv in plan.levels] == [
        lv.effective.min_similarity for lv in explained.chain] == [0.7, None]
    assert explained.default.how == "saved by an earlier mount"
    assert plan.size == explained.own.effective.listing_size == PRESET_SIZES["standard"]


def test_an_inheriting_plan_is_what_eval_measures() -> None:
    plan = inheriting_plan("gzip", ("Text",), 50)
    assert plan.levels == (Level("gzip", None, ("Text",)),)  # the server default applies
    assert (plan.limit, plan.size) == (50, PRESET_SIZES["standard"])
    assert inheriting_plan("gzip", (), 50, cut=False).size is None  # --no-cut


def cut_status(query: SavedQuery, scores: list[float], size: int | None, limit: int = 50
               ) -> dict[str, str]:
    """The status of a listing of a single term whose ranking is ``scores``, fetched as
    deep as its plan fetches it (a full fetch: more may follow)."""
    explanation = explain_thresholds([query], (), (), ADMIN)
    response = SearchResponse(query.text, (), 0.5, None, None, None)
    plan = plan_of(explanation, limit, query.limit is not None)
    fetched = scores[:plan.depth]
    count = LevelCount("level", query.text, len(fetched), more=len(fetched) == plan.depth)
    listing = ResultSet(plan, response, 0.0, 0.0, levels=(count,),
                        cut=relevance_cut(fetched, size, limit))
    text = status_file(query, explanation, listing, None).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


def test_status_says_where_the_listing_was_cut_why_and_how_to_see_more() -> None:
    query = SavedQuery(("q",), "q")
    lines = cut_status(query, [0.91, 0.76, 0.72, 0.6], PRESET_SIZES["standard"])
    assert lines["cut"] == ("after 2 of 4 matches: the score falls from 0.76 to 0.72, more "
                            "than 0.16 below the best (0.91)")
    flat = cut_status(query, [0.5] * 50, PRESET_SIZES["standard"])
    assert flat["cut"] == ("after 12 of at least 13 matches: the standard listing size is "
                           "12; the next match scores 0.50, within 0.16 of the best (0.50)")
    assert flat["more"] == ("write a number (up to 1000) to .meta/limit to list every "
                            "match above the threshold 0.5, up to that many, or "
                            "comprehensive for up to 25")
    exact = cut_status(SavedQuery(("q",), "q", threshold="exact"), [0.7] * 9,
                       PRESET_SIZES["exact"])
    assert exact["cut"].startswith("after 5 of at least 6 matches: the exact listing size is "
                                   "5; ")
    assert exact["more"].startswith("write a number (up to 1000) to .meta/limit to list "
                                    "every match above the threshold 0.6")


# Regression test (issue 34): past the score gap a larger preset lists the same files,
# yet 'more' offered comprehensive.
def test_more_offers_only_what_would_list_more() -> None:
    query = SavedQuery(("q",), "q")
    gap = cut_status(query, [0.91, 0.76, 0.72, 0.6], PRESET_SIZES["standard"])
    assert gap["more"] == ("write a number (up to 1000) to .meta/limit to list every "
                           "match above the threshold 0.5, up to that many")
    limited = cut_status(SavedQuery(("q",), "q", limit=2), [0.9, 0.85, 0.5], None, limit=2)
    assert limited["cut"] == "after 2 of at least 2 matches: .meta/limit is 2"
    assert limited["more"] == "write a larger number (up to 1000) to .meta/limit"
    widest = cut_status(SavedQuery(("q",), "q", threshold="comprehensive"), [0.5] * 30,
                        PRESET_SIZES["comprehensive"])
    assert widest["more"] == ("write a number (up to 1000) to .meta/limit to list every "
                              "match above the threshold 0.44, up to that many")


def listed_with_near_misses(query: SavedQuery, scores: list[float],
                            near: tuple[tuple[str, float], ...]) -> dict[str, str]:
    """The status of a listing that nothing cut (every match above the threshold is
    listed), with the near misses the server named below it."""
    explanation = explain_thresholds([query], (), (), ADMIN)
    used = explanation.own.effective.value
    response = SearchResponse(query.text, (), used, None, None, None, near_misses=near)
    size = explanation.own.effective.listing_size
    listing = ResultSet(plan_of(explanation), response, 0.0, 0.0,
                        cut=relevance_cut(scores, size, 50))
    text = status_file(query, explanation, listing, None).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


# Regression test (issue 40): 'cut: none: all 8 ...' offered no 'more' though
# comprehensive, a lower threshold, listed 25.
def test_more_offers_a_lower_threshold_where_nothing_was_cut_and_one_lists_more() -> None:
    query = SavedQuery(("q",), "q")
    lines = listed_with_near_misses(query, [0.56, 0.53, 0.51], (("a", 0.47), ("b", 0.45)))
    assert lines["cut"] == "none: all 3 within 0.16 of the best score are listed"
    assert lines["more"] == (
        "a lower threshold lists more: the next match scores 0.47, below 0.5 and within "
        "0.16 of the best (0.56); echo comprehensive > .meta/threshold (0.44) lists it")
    # below comprehensive's value: the number that lists it
    low = listed_with_near_misses(query, [0.56, 0.53], (("a", 0.4123),))
    assert low["more"].endswith("the next match scores 0.41, below 0.5 and within 0.16 of "
                                "the best (0.56); echo 0.41 > .meta/threshold lists it")
    # too far below the best: every threshold lists the same files
    assert "more" not in listed_with_near_misses(query, [0.9, 0.8], (("a", 0.47),))
    # none named (a page not short): comprehensive may list more, and says so as a maybe
    assert listed_with_near_misses(query, [0.9, 0.8], ())["more"] == (
        "echo comprehensive > .meta/threshold searches down to 0.44 and may list more "
        "(up to 25; below the default, some may be noise)")
    # comprehensive itself: a number lower still
    wide = listed_with_near_misses(SavedQuery(("q",), "q", threshold="comprehensive"),
                                   [0.5, 0.48], (("a", 0.42),))
    assert wide["more"].endswith("echo 0.42 > .meta/threshold lists it"), wide


# Regression test (issue 34): a listing the size stopped said 'the score falls from 0.72
# to 0.72', and one the gap stopped showed a fall of 0.16 as 'more than 0.16'.
def test_the_cut_says_truly_what_stopped_it() -> None:
    query = SavedQuery(("q",), "q")
    near = cut_status(query, [0.88, 0.7201, 0.7199, 0.5], PRESET_SIZES["standard"])
    assert near["cut"] == ("after 2 of 4 matches: the score falls from 0.7201 to 0.7199, "
                           "more than 0.16 below the best (0.8800)")
    both = cut_status(query, [0.8] * 12 + [0.5] * 5, PRESET_SIZES["standard"])
    assert both["cut"] == ("after 12 of at least 13 matches: the score falls from 0.80 to "
                           "0.50, more than 0.16 below the best (0.80); the standard "
                           "listing size is 12 too")
    assert "comprehensive" not in both["more"]
    for lines in (near, both, cut_status(query, [0.5] * 50, PRESET_SIZES["standard"])):
        assert "from 0.50 to 0.50" not in lines["cut"]


def test_status_of_an_explicit_threshold_or_a_limit() -> None:
    own = SavedQuery(("q",), "q", threshold=0.3)  # below the default: comprehensive's size
    assert cut_status(own, [0.9, 0.4], PRESET_SIZES["comprehensive"])["cut"] == (
        "after 1 of 2 matches: the score falls from 0.90 to 0.40, more than 0.16 below the "
        "best (0.90)")
    written = SavedQuery(("q",), "q", threshold=0.3, limit=40)
    assert cut_status(written, [0.9, 0.4], None, limit=40)["cut"] == (
        "none: .meta/limit is written, so every match above the threshold is listed")
    limited = cut_status(SavedQuery(("q",), "q", threshold=0.3, limit=2), [0.9, 0.8],
                         None, limit=2)
    assert limited["cut"] == "after 2 of at least 2 matches: .meta/limit is 2"
    assert limited["more"] == "write a larger number (up to 1000) to .meta/limit"


# Regression test (issue 34): an empty inheriting listing had no 'cut' line at all.
def test_an_empty_listing_says_why_it_is_empty() -> None:
    query = SavedQuery(("q",), "q")
    assert cut_status(query, [], PRESET_SIZES["standard"])["cut"] == (
        "nothing listed: no concept reached the threshold 0.5; the server reported no near "
        "miss")
    explanation = explain_thresholds([query], (), (), ADMIN)
    response = SearchResponse("q", (), 0.5, None, None, None,
                              near_misses=(("posixpath.split", 0.4095), ("b", 0.3)))
    listing = ResultSet(plan_of(explanation), response, 0.0, 0.0,
                        cut=relevance_cut([], 12, 50))
    lines = dict(line.split(": ", 1) for line in
                 status_file(query, explanation, listing, None).decode().splitlines())
    assert lines["cut"] == ("nothing listed: no concept reached the threshold 0.5; the best "
                            "scored 0.4095 (posixpath.split)")
    assert "more" not in lines
    nested = explain_thresholds([PARENT, CHILD], (), (), ADMIN)
    counts = (LevelCount("level", PARENT.text, 12, 40), LevelCount("level", CHILD.text, 40))
    assert status(CHILD, nested, counts)["cut"] == (
        "nothing listed: none of this query's 40 matches reaches every enclosing level's "
        "threshold (see filtered by)")
    excluded = SavedQuery(("q",), "q", exclude=("x",))
    explained = explain_thresholds([excluded], (), ("x",), ADMIN)
    counts = (LevelCount("level", "q", 3), LevelCount("exclude", "x", 9, 3))
    assert status(excluded, explained, counts)["cut"] == (
        "nothing listed: the exclude terms removed every match (3)")


def test_counts_read_the_way_a_person_writes_them() -> None:
    explained = explain_thresholds([PARENT, CHILD], (), (), ADMIN)
    lines = status(CHILD, explained, (LevelCount("level", PARENT.text, 1, 0),
                                       LevelCount("level", CHILD.text, 2)))
    assert lines["level 1"].endswith("; 1 match, 0 of this query's matches not among them")
    assert lines["level 2"].endswith("; 2 matches")
    assert lines["thresholds"].startswith("2 levels;")
