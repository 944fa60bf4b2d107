"""Listings are kept within a byte budget: the least recently used one is evicted first,
and its eviction is announced (the kernel must forget its names)."""

from __future__ import annotations

from kg_fuse.client.models import SearchResponse
from kg_fuse.fs.plan import Level, QueryPlan
from kg_fuse.fs.results import ResultFile, ResultSet, _Listings


def listing(files: int, size: int) -> ResultSet:
    plan = QueryPlan((Level("text", None),), 50)
    response = SearchResponse("text", (), 0.5, None, None, None)
    result_set = ResultSet(plan, response, 0.0, 0.0)
    for i in range(files):
        result_set.add(ResultFile(f"c{i}.concept.md", f"c{i}", 0.5, b"x" * size, 0))
    return result_set


def test_the_least_recently_used_listing_goes_first_and_is_announced() -> None:
    evicted: list[str] = []
    one = listing(10, 1000)
    cache = _Listings(budget=int(one.nbytes * 3.5), on_evict=lambda k, _: evicted.append(k))
    for key in "abc":
        cache[key] = listing(10, 1000)
    assert cache.get("a") is not None  # "a" is now the most recently used
    cache["d"] = listing(10, 1000)
    assert evicted == ["b"]
    assert set(cache) == {"a", "c", "d"}
    assert cache.currsize <= cache.maxsize


def test_the_size_counts_the_bodies() -> None:
    assert listing(10, 5000).nbytes >= 50_000
    assert listing(10, 5000).nbytes < listing(10, 10_000).nbytes
