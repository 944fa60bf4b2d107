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
from dataclasses import dataclass, replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.errors import RETRIED
from kg_fuse.fs.queries import why
from kg_fuse.fs.queries.details import ConceptDetails
from kg_fuse.fs.queries.render import concept_markdown
from kg_fuse.fs.queries.state import (
    Dropped,
    Failure,
    QueryState,
    QueryStates,
    ResultFile,
    ResultSet,
)
from kg_fuse.listing.execute import PlanOutcome, execute
from kg_fuse.listing.plan import QueryPlan
from kg_fuse.retry import Backoff

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Fetched:
    """What one ``get`` learned, for its caller to act on (nothing here acts on it):
    the listing and, when this call fetched it, the one it replaced, those the byte
    budget dropped to make room, and the default and presets the server reported (an
    inheriting search reports the default; any search may publish the presets). Made on
    every ``get``, the hot path of ``ls``: slots, no factory."""

    listing: ResultSet
    fetched: bool = False
    previous: ResultSet | None = None
    dropped: Dropped = ()
    default_seen: float | None = None
    presets_seen: dict[str, float] | None = None


class ResultCache:
    """Fetches listings into the queries' states (``QueryStates``, which owns and drops
    them), and hands back what each fetch learned."""

    def __init__(
        self,
        client: KgApiClient,
        max_age: float,
        states: QueryStates,
        details: ConceptDetails,
    ) -> None:
        self._client = client
        self.max_age = max_age
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
        """After a failed fetch: the last listing, marked stale, or the error if none is
        held. Settings changed meanwhile wait for the server: until it answers, ``ls``
        shows the listing of the earlier ones (``QueryService.pending`` tells, and the
        status says so), not an error for a directory that listed a moment ago."""
        current = state.listing
        if current is None:
            # a copy per raise (method, path and status kept): callers in other tasks
            # must not share one exception object and its traceback
            raise copy.copy(error)
        current.stale = True
        return current

    async def get(self, key: str, plan: QueryPlan) -> Fetched:
        """The query's results, fetched if stale. Identical concurrent requests share one
        fetch, and its failure: callers queued behind a failed fetch get its outcome at
        once, and while the backoff after a failure of the server runs (the retry policy,
        ``kg_fuse.retry``; or until the server answers the poll again) everyone
        gets that failure at once: one request per attempt, however many callers. An
        answer such as 401 or 404 ends the wait (the next caller asks again). Only the
        caller whose fetch ran gets what it learned."""
        state = self.states.get(key)
        current = self.states.listing(key)
        if self._usable(current, plan):
            return Fetched(current)  # type: ignore[arg-type]
        now = trio.current_time()
        if state.retries is not None and state.retries.waiting:
            error = self._recent_failure(state, plan, float("-inf"))
            if error is not None:
                return Fetched(self._fallback(state, plan, error))
        async with state.lock:
            current = state.listing
            if self._usable(current, plan):
                return Fetched(current)  # type: ignore[arg-type]
            error = self._recent_failure(state, plan, now)
            if error is not None:
                return Fetched(self._fallback(state, plan, error))
            try:
                fresh, outcome = await self._fetch(state, plan)
            except errors.KgError as exc:
                return self._failed(state, plan, current, exc)
            return self._fetched(state, current, fresh, outcome)

    def _failed(self, state: QueryState, plan: QueryPlan, current: ResultSet | None,
                exc: errors.KgError) -> Fetched:
        """A fetch failed: remember it (and, if the server is down or failing, wait
        before the next try), and answer with the last listing held, or the error."""
        if current is not None:
            log.warning("serving stale results for %r%s: %s", state.key,
                        "" if current.plan == plan else " (of earlier settings)", exc)
        state.failure = Failure(trio.current_time(), plan, exc)
        if isinstance(exc, RETRIED):  # down or failing: wait before the next try
            state.retries = state.retries or Backoff()
            state.retries.failed()
        else:  # the server answered: the next caller may try at once
            state.retries = None
        return Fetched(self._fallback(state, plan, exc))

    def _fetched(self, state: QueryState, current: ResultSet | None, fresh: ResultSet,
                 outcome: PlanOutcome) -> Fetched:
        """A fetch succeeded: the new listing replaces ``current`` (unless the query was
        removed meanwhile), and what it learned goes back to the caller."""
        state.failure = state.retries = None
        if self.states.find(state.key) is not state:  # removed while we were fetching
            return Fetched(fresh, default_seen=outcome.default_seen,
                           presets_seen=outcome.presets_seen)
        dropped = self.states.store(state, fresh)
        return Fetched(fresh, True, current, dropped, outcome.default_seen,
                       outcome.presets_seen)

    async def _fetch(self, state: QueryState, plan: QueryPlan
                     ) -> tuple[ResultSet, PlanOutcome]:
        outcome = await execute(self._client, plan)
        details = await self.details.fetch([hit.concept_id for hit in outcome.hits])
        names = state.names
        # the hints only: the hits are in the files already (and a page of hits with
        # their descriptions costs more memory than the rendered files)
        hints = replace(outcome.primary, results=())
        result_set = ResultSet(plan, hints, trio.current_time(), time.time(),
                               levels=outcome.levels, cut=outcome.cut)
        now_ns = time.time_ns()
        context = why.listing(plan.own.text, outcome.primary.threshold_used,
                              plan.own.min_similarity is None, outcome.hits,
                              outcome.primary.expanded_words)
        whys = []
        for hit in outcome.hits:
            # interned: the same concept in many queries keeps one id and one name
            concept_id = sys.intern(hit.concept_id)
            name = names.name_for(concept_id, hit.label)
            if name in result_set.files:  # the server listed one concept twice
                continue
            detail = details.get(concept_id)
            explained = why.explain(hit, detail, context)
            whys.append(explained)
            body = concept_markdown(hit, detail, explained.text)
            mtime = state.mtime_for(concept_id, body, now_ns)
            result_set.add(ResultFile(name, concept_id, hit.score, body, mtime,
                                      explained.text.encode("utf-8", errors="replace")))
        result_set.why = why.summarise(whys, context,
                                       any(h.why is not None for h in outcome.hits))
        log.debug("fetched %d results for %r", len(result_set.files), state.key)
        return result_set, outcome
