"""Fetching and caching a query's results as rendered files.

A result set is fetched once and kept until something says it changed (the server's
epoch, its default threshold, the query's own threshold) or it is ``max_age`` seconds
old. Identical concurrent requests share one fetch. Files are rendered when fetched, so
every file's exact size is known for ``ls -l``, and keep their mtime while their content
is unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.models import ConceptDetail, ConceptHit, SearchResponse
from kg_fuse.fs.names import NameRegistry
from kg_fuse.fs.plan import QueryPlan, execute
from kg_fuse.fs.render import concept_markdown

log = logging.getLogger(__name__)

DETAIL_CONCURRENCY = 8


@dataclass(frozen=True)
class ResultFile:
    name: str
    concept_id: str
    score: float
    body: bytes
    mtime_ns: int


@dataclass
class ResultSet:
    """One fetched listing of a query: files in rank order, plus the server's hints."""

    plan: QueryPlan
    response: SearchResponse
    fetched_at: float
    fetched_wall: float
    files: dict[str, ResultFile] = field(default_factory=dict)
    by_concept: dict[str, ResultFile] = field(default_factory=dict)
    stale: bool = False

    def add(self, result: ResultFile) -> None:
        self.files[result.name] = result
        self.by_concept[result.concept_id] = result


# Called with (query key, the previous set or None, the new set) after each refresh.
RefreshListener = Callable[[str, "ResultSet | None", ResultSet], None]
# Called with the server default reported by an inheriting search.
DefaultListener = Callable[[float], None]


class ResultCache:
    def __init__(
        self,
        client: KgApiClient,
        max_age: float,
        on_refresh: RefreshListener | None = None,
        on_default: DefaultListener | None = None,
    ) -> None:
        self._client = client
        self.max_age = max_age
        self.on_refresh = on_refresh
        self.on_default = on_default
        self._sets: dict[str, ResultSet] = {}
        self._names: dict[str, NameRegistry] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._details: dict[str, tuple[float, ConceptDetail]] = {}

    def cached(self, key: str) -> ResultSet | None:
        return self._sets.get(key)

    def invalidate(self, key: str) -> None:
        """Force the next ``get`` to fetch (the set stays available as a stale fallback)."""
        result_set = self._sets.get(key)
        if result_set is not None:
            result_set.fetched_at = float("-inf")

    def invalidate_inheriting(self) -> None:
        for result_set in self._sets.values():
            if any(level.min_similarity is None for level in result_set.plan.levels):
                result_set.fetched_at = float("-inf")

    def invalidate_all(self) -> None:
        """The server's content changed: refetch every listing and concept on next use."""
        for result_set in self._sets.values():
            result_set.fetched_at = float("-inf")
        self._details.clear()

    def forget(self, key: str) -> None:
        self._sets.pop(key, None)
        self._names.pop(key, None)
        self._locks.pop(key, None)

    def _usable(self, rs: ResultSet | None, plan: QueryPlan) -> bool:
        return (
            rs is not None
            and rs.plan == plan
            and trio.current_time() - rs.fetched_at < self.max_age
        )

    async def get(self, key: str, plan: QueryPlan) -> ResultSet:
        """The query's results; fetched if stale. If the server fails and an earlier set
        for the same plan exists, it is returned marked stale; otherwise the KgError
        propagates (a listing for other settings would be a lie)."""
        current = self._sets.get(key)
        if self._usable(current, plan):
            return current  # type: ignore[return-value]
        lock = self._locks.setdefault(key, trio.Lock())
        async with lock:
            current = self._sets.get(key)
            if self._usable(current, plan):
                return current  # type: ignore[return-value]
            try:
                fresh = await self._fetch(key, plan, current)
            except errors.KgError as exc:
                if current is None or current.plan != plan:
                    raise
                log.warning("serving stale results for %r: %s", key, exc)
                current.stale = True
                return current
            if key in self._locks:  # not removed while we were fetching
                self._sets[key] = fresh
                if self.on_refresh is not None:
                    self.on_refresh(key, current, fresh)
            return fresh

    async def _fetch(self, key: str, plan: QueryPlan, previous: ResultSet | None) -> ResultSet:
        outcome = await execute(self._client, plan)
        if outcome.default_seen is not None and self.on_default is not None:
            self.on_default(outcome.default_seen)
        details = await self._fetch_details([hit.concept_id for hit in outcome.hits])
        names = self._names.setdefault(key, NameRegistry())
        result_set = ResultSet(plan, outcome.primary, trio.current_time(), time.time())
        now_ns = time.time_ns()
        for hit in outcome.hits:
            name = names.name_for(hit.concept_id, hit.label)
            if name in result_set.files:  # the server listed one concept twice
                continue
            body = concept_markdown(hit, details.get(hit.concept_id))
            old = previous.files.get(name) if previous else None
            mtime = old.mtime_ns if old is not None and old.body == body else now_ns
            result_set.add(ResultFile(name, hit.concept_id, hit.score, body, mtime))
        log.debug("fetched %d results for %r", len(result_set.files), key)
        return result_set

    async def _fetch_details(self, concept_ids: list[str]) -> dict[str, ConceptDetail]:
        found: dict[str, ConceptDetail] = {}
        now = trio.current_time()
        missing = []
        for cid in concept_ids:
            cached = self._details.get(cid)
            if cached is not None and now - cached[0] < self.max_age:
                found[cid] = cached[1]
            else:
                missing.append(cid)
        limiter = trio.CapacityLimiter(DETAIL_CONCURRENCY)

        async def fetch_one(cid: str) -> None:
            async with limiter:
                try:
                    detail = await self._client.concept(cid)
                except errors.KgError as exc:
                    log.info("no details for concept %s: %s", cid, exc)
                    return
            self._details[cid] = (trio.current_time(), detail)
            found[cid] = detail

        # All details share one deadline: a server that answers the search but stalls on
        # details costs one request timeout, and the files render without the details.
        with trio.move_on_after(self._client.timeout) as scope:
            async with trio.open_nursery() as nursery:
                for cid in missing:
                    nursery.start_soon(fetch_one, cid)
        if scope.cancelled_caught:
            log.warning("concept details timed out; %d of %d rendered without them",
                        len(missing) - (len(found) - (len(concept_ids) - len(missing))),
                        len(concept_ids))
        return found


def hit_summary(hit: ConceptHit | None) -> str:
    return "none" if hit is None else f"{hit.label} ({hit.score:.3f})"
