"""Fetching and caching a query's results as rendered files.

A result set is fetched once and kept until something says it changed (the server's
epoch, its default threshold, the query's own threshold) or it is ``max_age`` seconds
old. Identical concurrent requests share one fetch. Files are rendered when fetched, so
every file's exact size is known for ``ls -l``, and keep their mtime while their content
is unchanged.

Memory is bounded: listings are held by their query's state (``query_state``) within a
byte budget (``SETS_BUDGET``, 32 MiB of rendered bodies, least recently used dropped
first), concept details in an LRU of their own (``DETAILS_BUDGET``, 8 MiB; emptied
once no listing is held, and expired after ``max_age`` by the poller). A dropped
listing is fetched again when next used (the kernel is told to forget its names first).
Details are fetched over a bounded pool of kept-alive connections; the batch's deadline
scales with its size, and a stalled server ends it at the first request timeout (files
then render without details).
"""

from __future__ import annotations

import copy
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import trio
from cachetools import LRUCache

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.models import ConceptDetail, SearchResponse
from kg_fuse.fs.plan import LevelCount, QueryPlan, execute
from kg_fuse.fs.query_state import Failure, QueryState, QueryStates
from kg_fuse.fs.render import concept_markdown

log = logging.getLogger(__name__)

DETAIL_CONCURRENCY = 8  # concept details in flight at once (the client's pool is larger)
DETAILS_BUDGET = 8 * 2**20  # bytes of concept details kept between listings


@dataclass(frozen=True, slots=True)
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
    levels: tuple[LevelCount, ...] = ()  # how each level and term shaped the listing

    def add(self, result: ResultFile) -> None:
        self.files[result.name] = result
        self.by_concept[result.concept_id] = result
        self.nbytes += len(result.body) + 2 * len(result.name) + 200

    nbytes: int = 0


def _detail_size(item: tuple[float, ConceptDetail]) -> int:
    detail = item[1]
    return 300 + len(detail.description) + len(detail.signature) + sum(
        200 + len(e.quote) + len(e.full_text) + len(e.filename or "") + len(e.document)
        for e in detail.evidence) + sum(
        150 + len(r.to_label) + len(r.to_id) for r in detail.relationships)


# Called with (query key, the previous set or None, the new set) after each refresh.
RefreshListener = Callable[[str, "ResultSet | None", ResultSet], None]
# Called with the server default reported by an inheriting search (None if none ran)
# and the intensity presets any search published (None if none did).
DefaultListener = Callable[["float | None", "dict[str, float] | None"], None]


class ResultCache:
    """Fetches listings into the queries' states (``QueryStates``, which owns and drops
    them) and keeps concept details in their own LRU."""

    def __init__(
        self,
        client: KgApiClient,
        max_age: float,
        states: QueryStates,
        on_refresh: RefreshListener | None = None,
        on_default: DefaultListener | None = None,
        retry_after: float = 5.0,
    ) -> None:
        self._client = client
        self.max_age = max_age
        self.retry_after = retry_after
        self.on_refresh = on_refresh
        self.on_default = on_default
        self.states = states
        self._details: LRUCache = LRUCache(DETAILS_BUDGET, getsizeof=_detail_size)

    @property
    def nbytes(self) -> int:
        return self.states.nbytes + int(self._details.currsize)

    def ttl(self, key: str) -> float:
        """How long the kernel may keep the listing's names and attributes: until the
        listing expires (``max_age``); zero once it is stale or gone."""
        state = self.states.find(key)
        result_set = state.listing if state is not None else None
        if result_set is None or result_set.stale:
            return 0.0
        return max(0.0, result_set.fetched_at + self.max_age - trio.current_time())

    def _expire(self, key: str, result_set: ResultSet) -> None:
        expired = result_set.fetched_at == float("-inf")
        result_set.fetched_at = float("-inf")
        if not expired and self.states.on_stale is not None:
            self.states.on_stale(key, result_set)

    def invalidate(self, key: str) -> None:
        """Force the next ``get`` to fetch (the set stays available as a stale fallback)."""
        state = self.states.find(key)
        if state is not None and state.listing is not None:
            self._expire(key, state.listing)

    def invalidate_inheriting(self) -> None:
        for state in self.states:
            result_set = state.listing
            if result_set is not None and any(
                    level.min_similarity is None for level in result_set.plan.levels):
                self._expire(state.key, result_set)

    def invalidate_all(self) -> None:
        """The server's content changed: refetch every listing and concept on next use."""
        for state in self.states:
            if state.listing is not None:
                self._expire(state.key, state.listing)
        self._details.clear()

    def drop_unused_details(self, expired_too: bool = False) -> int:
        """Drop the concept details no listing will use: all of them once no listing is
        held (the queries were removed or forgotten), and with ``expired_too`` those
        older than ``max_age`` (a listing refetches them anyway). Returns the bytes."""
        before = int(self._details.currsize)
        if not self.states.nbytes:
            self._details.clear()
        elif expired_too:
            now = trio.current_time()
            for cid in [c for c, (at, _) in self._details.items() if now - at >= self.max_age]:
                del self._details[cid]
        return before - int(self._details.currsize)

    def server_back(self) -> None:
        """The server answered again: the next listing may try at once."""
        for state in self.states:
            state.failure = None

    def _usable(self, rs: ResultSet | None, plan: QueryPlan) -> bool:
        return (
            rs is not None
            and rs.plan == plan
            and trio.current_time() - rs.fetched_at < self.max_age
        )

    @staticmethod
    def _recent_failure(state: QueryState, plan: QueryPlan, since: float
                        ) -> errors.KgError | None:
        failure = state.failure
        if failure is None or failure.plan != plan or failure.at < since:
            return None
        return failure.error

    @staticmethod
    def _fallback(state: QueryState, plan: QueryPlan, error: errors.KgError) -> ResultSet:
        """After a failed fetch: the last listing of the same plan, marked stale, or the
        error (a listing for other settings would be a lie)."""
        current = state.listing
        if current is None or current.plan != plan:
            # a copy per raise (method, path and status kept): callers in other tasks
            # must not share one exception object and its traceback
            raise copy.copy(error)
        current.stale = True
        return current

    async def get(self, key: str, plan: QueryPlan) -> ResultSet:
        """The query's results, fetched if stale. Identical concurrent requests share one
        fetch, and its failure: callers queued behind a failed fetch get its outcome at
        once, and after a timeout, for ``retry_after`` seconds (or until the server is
        back), nobody waits on another deadline. Fast failures are simply retried."""
        state = self.states.get(key)
        current = self.states.listing(key)
        if self._usable(current, plan):
            return current  # type: ignore[return-value]
        now = trio.current_time()
        error = self._recent_failure(state, plan, now - self.retry_after)
        if isinstance(error, errors.ServerTimeout):  # only a stall is worth not retrying
            return self._fallback(state, plan, error)
        async with state.lock:
            current = state.listing
            if self._usable(current, plan):
                return current  # type: ignore[return-value]
            error = self._recent_failure(state, plan, now)
            if error is not None:
                return self._fallback(state, plan, error)
            try:
                fresh = await self._fetch(state, plan)
            except errors.KgError as exc:
                if current is not None and current.plan == plan:
                    log.warning("serving stale results for %r: %s", key, exc)
                state.failure = Failure(trio.current_time(), plan, exc)
                return self._fallback(state, plan, exc)
            state.failure = None
            if self.states.find(key) is state:  # not removed while we were fetching
                self.states.store(state, fresh)
                if self.on_refresh is not None:
                    self.on_refresh(key, current, fresh)
            return fresh

    async def _fetch(self, state: QueryState, plan: QueryPlan) -> ResultSet:
        outcome = await execute(self._client, plan)
        if self.on_default is not None and (outcome.default_seen is not None
                                            or outcome.presets_seen is not None):
            self.on_default(outcome.default_seen, outcome.presets_seen)
        details = await self._fetch_details([hit.concept_id for hit in outcome.hits])
        names = state.names
        # the hints only: the hits are in the files already (and a page of hits with
        # their descriptions costs more memory than the rendered files)
        hints = replace(outcome.primary, results=())
        result_set = ResultSet(plan, hints, trio.current_time(), time.time(),
                               levels=outcome.levels)
        now_ns = time.time_ns()
        for hit in outcome.hits:
            # interned: the same concept in many queries keeps one id and one name
            concept_id = sys.intern(hit.concept_id)
            name = names.name_for(concept_id, hit.label)
            if name in result_set.files:  # the server listed one concept twice
                continue
            body = concept_markdown(hit, details.get(concept_id))
            mtime = state.mtime_for(concept_id, body, now_ns)
            result_set.add(ResultFile(name, concept_id, hit.score, body, mtime))
        log.debug("fetched %d results for %r", len(result_set.files), state.key)
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
        if not missing:
            return found
        limiter = trio.CapacityLimiter(DETAIL_CONCURRENCY)
        stalled = False

        async def fetch_one(cid: str, scope: trio.CancelScope) -> None:
            nonlocal stalled
            async with limiter:
                try:
                    detail = await self._client.concept(cid)
                except errors.ServerTimeout as exc:  # stalled: stop the batch now
                    log.info("no details for concept %s: %s", cid, exc)
                    stalled = True
                    scope.cancel()
                    return
                except errors.KgError as exc:
                    log.info("no details for concept %s: %s", cid, exc)
                    return
            self._details[cid] = (trio.current_time(), detail)
            found[cid] = detail

        # The deadline scales with the work (one request timeout per round of
        # DETAIL_CONCURRENCY requests), so a busy but healthy server completes a
        # 1000-result listing; a stalled one ends the batch at its first timeout.
        rounds = math.ceil(len(missing) / DETAIL_CONCURRENCY)
        with trio.move_on_after(self._client.timeout * rounds) as scope:
            async with trio.open_nursery() as nursery:
                for cid in missing:
                    nursery.start_soon(fetch_one, cid, nursery.cancel_scope)
        if scope.cancelled_caught or stalled:
            fetched = len(found) - (len(concept_ids) - len(missing))
            log.warning("concept details timed out; %d of %d rendered without them",
                        len(missing) - fetched, len(concept_ids))
        return found


