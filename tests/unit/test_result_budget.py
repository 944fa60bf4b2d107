"""One state per query, dropped in one place: listings are kept within a byte budget
(the least recently used dropped first, announced so the kernel forgets their names);
``rmdir`` drops everything about a query; the kernel forgetting a query's directory drops
what the next listing rebuilds and keeps what the user wrote."""

from __future__ import annotations

import pytest

from kg_fuse.client.models import SearchResponse
from kg_fuse.fs.queries.state import Drop, QueryStates, ResultFile, ResultSet
from kg_fuse.listing.plan import Level, QueryPlan


def listing(files: int, size: int) -> ResultSet:
    plan = QueryPlan((Level("text", None),), 50)
    response = SearchResponse("text", (), 0.5, None, None, None)
    result_set = ResultSet(plan, response, 0.0, 0.0)
    for i in range(files):
        result_set.add(ResultFile(f"c{i}.concept.md", f"c{i}", 0.5, b"x" * size, 0))
    return result_set


@pytest.fixture
def states() -> QueryStates:
    return QueryStates(budget=int(listing(10, 1000).nbytes * 3.5))


def test_the_least_recently_used_listing_goes_first_and_is_announced(states) -> None:
    for key in "abc":
        assert states.store(states.get(key), listing(10, 1000)) == []
    assert states.listing("a") is not None  # "a" is now the most recently used
    announced = states.store(states.get("d"), listing(10, 1000))
    assert [key for key, _ in announced] == ["b"]
    assert states.listing("b") is None and states.find("b") is not None  # names kept
    assert {k for k in "abcd" if states.listing(k) is not None} == {"a", "c", "d"}
    assert states.nbytes <= listing(10, 1000).nbytes * 3.5


def test_the_size_counts_the_bodies() -> None:
    assert listing(10, 5000).nbytes >= 50_000
    assert listing(10, 5000).nbytes < listing(10, 10_000).nbytes


def test_rmdir_drops_the_whole_state_and_frees_its_budget(states) -> None:
    state = states.get("q")
    state.names.name_for("c1", "Label")
    state.scratch["threshold.swp"] = bytearray(b"0.5")
    state.meta_mtimes[""] = 123
    states.store(state, listing(10, 1000))
    states.drop("q", Drop.REMOVED)
    assert states.find("q") is None and states.nbytes == 0
    fresh = states.get("q")  # a new query of the same name starts empty
    assert not fresh.scratch and not fresh.meta_mtimes and fresh.listing is None


def test_a_forgotten_query_drops_its_listing_and_keeps_names_and_mtimes(states) -> None:
    state = states.get("q")
    state.names.name_for("c1", "Label")
    assert state.mtime_for("c1", b"body", 5) == 5
    state.scratch["threshold.swp"] = bytearray(b"0.5")
    state.meta_mtimes["threshold"] = 123
    states.store(state, listing(10, 1000))
    announced = states.drop("q", Drop.FORGOTTEN)
    assert states.listing("q") is None and states.nbytes == 0
    assert state.mtime_for("c1", b"body", 99) == 5  # the next listing keeps them
    assert state.names.name_for("c2", "Label") != "Label.concept.md"
    assert state.scratch == {"threshold.swp": bytearray(b"0.5")}
    assert state.meta_mtimes == {"threshold": 123}
    assert announced == []  # the kernel holds none of its names: nothing to tell it


def test_a_result_keeps_its_mtime_only_while_its_bytes_are_the_same(states) -> None:
    state = states.get("q")
    assert state.mtime_for("c1", b"first", 10) == 10
    assert state.mtime_for("c1", b"first", 20) == 10
    assert state.mtime_for("c1", b"second", 30) == 30  # changed: a new mtime
    assert state.mtime_for("c1", b"second", 40) == 30
    assert state.mtime_for("c2", b"second", 50) == 50  # per concept
