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
from kg_fuse.client.api import KgApiClient, SearchRequest
from kg_fuse.client.models import ConceptDetail, ConceptHit, SearchResponse
from kg_fuse.fs.names import NameRegistry
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
    """One fetched listing of a query: files in score order, plus the server's hints."""

    min_similarity: float | None
    response: SearchResponse
    fetched_at: float
    fetched_wall: float
    files: dict[str, ResultFile] = field(default_factory=dict)
    stale: bool = False

    def by_concept(self, concept_id: str) -> ResultFile | None:
        for f in self.files.values():
            if f.concept_id == concept_id:
                return f
        return None


# Called with (query name, the previous set or None, the new set) after each refresh.
RefreshListener = Callable[[str, "ResultSet | None", ResultSet], None]


class ResultCache:
    def __init__(
        self,
        client: KgApiClient,
        max_age: float,
        limit: int,
        on_refresh: RefreshListener | None = None,
    ) -> None:
        self._client = client
        self.max_age = max_age
        self.limit = limit
        self.on_refresh = on_refresh
        self._sets: dict[str, ResultSet] = {}
        self._names: dict[str, NameRegistry] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._details: dict[str, tuple[float, ConceptDetail]] = {}

    def cached(self, query_name: str) -> ResultSet | None:
        return self._sets.get(query_name)

    def invalidate(self, query_name: str) -> None:
        """Force the next ``get`` to fetch (the set stays available as a stale fallback)."""
        result_set = self._sets.get(query_name)
        if result_set is not None:
            result_set.fetched_at = float("-inf")

    def invalidate_inheriting(self) -> None:
        for result_set in self._sets.values():
            if result_set.min_similarity is None:
                result_set.fetched_at = float("-inf")

    def invalidate_all(self) -> None:
        """The server's content changed: refetch every listing and concept on next use."""
        for result_set in self._sets.values():
            result_set.fetched_at = float("-inf")
        self._details.clear()

    def forget(self, query_name: str) -> None:
        self._sets.pop(query_name, None)
        self._names.pop(query_name, None)
        self._locks.pop(query_name, None)

    def _usable(self, rs: ResultSet | None, min_similarity: float | None) -> bool:
        return (
            rs is not None
            and rs.min_similarity == min_similarity
            and trio.current_time() - rs.fetched_at < self.max_age
        )

    async def get(self, query_name: str, text: str, min_similarity: float | None) -> ResultSet:
        """The query's results; fetched if stale. If the server fails and an earlier set
        exists, that set is returned marked stale; otherwise the KgError propagates."""
        current = self._sets.get(query_name)
        if self._usable(current, min_similarity):
            return current  # type: ignore[return-value]
        lock = self._locks.setdefault(query_name, trio.Lock())
        async with lock:
            current = self._sets.get(query_name)
            if self._usable(current, min_similarity):
                return current  # type: ignore[return-value]
            try:
                fresh = await self._fetch(query_name, text, min_similarity, current)
            except errors.KgError as exc:
                if current is None or current.min_similarity != min_similarity:
                    raise
                log.warning("serving stale results for %r: %s", query_name, exc)
                current.stale = True
                return current
            if query_name in self._locks:  # not removed while we were fetching
                self._sets[query_name] = fresh
                if self.on_refresh is not None:
                    self.on_refresh(query_name, current, fresh)
            return fresh

    async def _fetch(
        self, query_name: str, text: str, min_similarity: float | None, previous: ResultSet | None
    ) -> ResultSet:
        request = SearchRequest(text, limit=self.limit, min_similarity=min_similarity)
        response = await self._client.search(request)
        details = await self._fetch_details([hit.concept_id for hit in response.results])
        names = self._names.setdefault(query_name, NameRegistry())
        result_set = ResultSet(min_similarity, response, trio.current_time(), time.time())
        now_ns = time.time_ns()
        for hit in response.results:
            name = names.name_for(hit.concept_id, hit.label)
            if name in result_set.files:  # the server listed one concept twice
                continue
            body = concept_markdown(hit, details.get(hit.concept_id))
            old = previous.files.get(name) if previous else None
            mtime = old.mtime_ns if old is not None and old.body == body else now_ns
            result_set.files[name] = ResultFile(name, hit.concept_id, hit.score, body, mtime)
        log.debug("fetched %d results for %r", len(result_set.files), query_name)
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
