"""Fetching and caching a query's results as rendered files.

A result set is fetched once and kept until it is expired (``QueryStates.expire``: the
invalidation decides when) or it is ``max_age`` seconds old. Identical concurrent
requests share one fetch. Files are rendered when fetched, so every file's exact size is
known for ``ls -l``, and keep their mtime while their content is unchanged.

Memory is bounded: listings are held by their query's state (``state``) within a
byte budget (``SETS_BUDGET``, 32 MiB of rendered bodies, least recently used dropped
first), concept details in their own LRU (``details``). A dropped listing is fetched
again when next used (the kernel is told to forget its names first).
"""

from __future__ import annotations

import copy
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.retry import Backoff, RetryPolicy
from kg_fuse.fs.queries.details import ConceptDetails
from kg_fuse.fs.queries.render import concept_markdown
from kg_fuse.fs.queries.searches import QueryPlan, execute
from kg_fuse.fs.queries.state import Failure, QueryState, QueryStates, ResultFile, ResultSet

log = logging.getLogger(__name__)


# Called with (query key, the previous set or None, the new set) after each refresh.
RefreshListener = Callable[[str, "ResultSet | None", ResultSet], None]
# Called with the server default reported by an inheriting search (None if none ran)
# and the intensity presets any search published (None if none did).
DefaultListener = Callable[["float | None", "dict[str, float] | None"], None]


class ResultCache:
    """Fetches listings into the queries' states (``QueryStates``, which owns and drops
    them); every default a fetch reports goes to ``default`` (the watcher's
    ``observe``)."""

    def __init__(
        self,
        client: KgApiClient,
        max_age: float,
        states: QueryStates,
        details: ConceptDetails,
        default: DefaultListener,
        on_refresh: RefreshListener | None = None,
        retry_after: float = 5.0,
    ) -> None:
        self._client = client
        self.max_age = max_age
        # after a stalled fetch the same listing waits ``retry_after`` (fixed, no jitter:
        # a burst of stats costs one deadline, and the next poll's answer ends the wait)
        self.retries = RetryPolicy.fixed(retry_after)
        self.on_refresh = on_refresh
        self._default = default
        self.states = states
        self.details = details

    @property
    def nbytes(self) -> int:
        return self.states.nbytes + self.details.nbytes

    def ttl(self, key: str) -> float:
        """How long the kernel may keep the listing's names and attributes: until the
        listing expires (``max_age``); zero once it is stale or gone."""
        state = self.states.find(key)
        result_set = state.listing if state is not None else None
        if result_set is None or result_set.stale:
            return 0.0
        return max(0.0, result_set.fetched_at + self.max_age - trio.current_time())

    def drop_unused_details(self, expired_too: bool = False) -> None:
        self.states.dropped(self.details.drop_unused(bool(self.states.nbytes), expired_too))

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
        once, and after a timeout, while its backoff runs (``retry_after`` seconds, or
        until the server is back), nobody waits on another deadline. Fast failures are
        simply retried."""
        state = self.states.get(key)
        current = self.states.listing(key)
        if self._usable(current, plan):
            return current  # type: ignore[return-value]
        now = trio.current_time()
        if state.retries is not None and state.retries.waiting:
            error = self._recent_failure(state, plan, float("-inf"))
            if error is not None:
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
                if isinstance(exc, errors.ServerTimeout):  # only a stall is worth waiting
                    state.retries = state.retries or Backoff(self.retries)
                    state.retries.failed()
                else:  # the server answered: the next caller may try at once
                    state.retries = None
                return self._fallback(state, plan, exc)
            state.failure = state.retries = None
            if self.states.find(key) is state:  # not removed while we were fetching
                self.states.store(state, fresh)
                if self.on_refresh is not None:
                    self.on_refresh(key, current, fresh)
            return fresh

    async def _fetch(self, state: QueryState, plan: QueryPlan) -> ResultSet:
        outcome = await execute(self._client, plan)
        if outcome.default_seen is not None or outcome.presets_seen is not None:
            self._default(outcome.default_seen, outcome.presets_seen)
        details = await self.details.fetch([hit.concept_id for hit in outcome.hits])
        names = state.names
        # the hints only: the hits are in the files already (and a page of hits with
        # their descriptions costs more memory than the rendered files)
        hints = replace(outcome.primary, results=())
        result_set = ResultSet(plan, hints, trio.current_time(), time.time(),
                               levels=outcome.levels, cut=outcome.cut)
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
