"""Saved queries as a service: create, remove, set thresholds, fetch results.

This is the domain layer under the FUSE operations; it knows nothing about inodes or
errnos and is tested directly against a real server.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient, SearchRequest
from kg_fuse.fs.names import parse_query_dir_name
from kg_fuse.fs.queries import QueryStore, SavedQuery, StoreState
from kg_fuse.fs.results import RefreshListener, ResultCache, ResultSet
from kg_fuse.fs.server_default import ServerDefault
from kg_fuse.fs.threshold import EffectiveThreshold, effective_threshold, floor_adjust

log = logging.getLogger(__name__)


class QueryExists(Exception):
    """A query with this name is already saved."""


class QueryNotFound(Exception):
    """No saved query has this name."""


class QueryService:
    def __init__(
        self,
        client: KgApiClient,
        store: QueryStore,
        state: StoreState,
        *,
        poll_interval: float = 5.0,
        max_age: float = 60.0,
        result_limit: int = 50,
        probe_timeout: float = 2.0,
        on_refresh: RefreshListener | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.state = state
        self.probe_timeout = probe_timeout
        self.results_cache = ResultCache(client, max_age, result_limit, on_refresh=on_refresh)
        self.server_default = ServerDefault(
            client, poll_interval, state.server_default_seen, on_change=self._default_changed
        )
        self.server_error: str | None = None
        self._epoch: int | None = None
        self._save_lock = trio.Lock()
        self._dirty_default = False

    # -- reading ------------------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(self.state.queries)

    def get(self, name: str) -> SavedQuery:
        try:
            return self.state.queries[name]
        except KeyError:
            raise QueryNotFound(name) from None

    def effective(self, query: SavedQuery) -> EffectiveThreshold:
        return effective_threshold(
            query.threshold, query.auto_adjusted, self.server_default.value
        )

    async def current_default(self, query: SavedQuery) -> float | None:
        """The server default, refreshed if stale (briefly cached; see ServerDefault)."""
        return await self.server_default.get(timeout=self.probe_timeout)

    async def results(self, query: SavedQuery) -> ResultSet:
        min_similarity = self.effective(query).min_similarity
        result_set = await self.results_cache.get(query.name, query.text, min_similarity)
        if min_similarity is None and not result_set.stale:
            self.server_default.observe(result_set.response.threshold_used)
        return result_set

    # -- watching the server -------------------------------------------------------------

    async def poll(self) -> None:
        """One look at the server: a changed epoch drops every cached listing (the next
        ``ls`` refetches), and the default is re-learned (a change drops the listings of
        inheriting queries)."""
        try:
            epoch = await self.client.epoch(timeout=self.probe_timeout)
            await self.server_default.refresh(timeout=self.probe_timeout)
        except errors.KgError as exc:
            if self.server_error is None:
                log.warning("server unavailable, serving cached listings: %s", exc)
            self.server_error = str(exc)
            return
        if self.server_error is not None:
            log.info("server available again")
        self.server_error = None
        if self._epoch is not None and epoch != self._epoch:
            log.info("server content changed (epoch %s -> %s)", self._epoch, epoch)
            self.results_cache.invalidate_all()
        self._epoch = epoch
        await self.save_if_dirty()

    async def watch(self, interval: float) -> None:
        """Poll the server every ``interval`` seconds until cancelled."""
        while True:
            await self.poll()
            await trio.sleep(interval)

    # -- changing -------------------------------------------------------------------------

    async def create(self, name: str) -> SavedQuery:
        """Save a query named as typed; ``NAME@0.8`` carries an explicit threshold, which
        the creation-time probe may lower (never below the server default)."""
        if name in self.state.queries:
            raise QueryExists(name)
        parsed = parse_query_dir_name(name)
        query = SavedQuery(name=name, text=parsed.text, threshold=parsed.threshold)
        if query.threshold is not None:
            query = await self._probe(query)
        if name in self.state.queries:  # created concurrently while we probed
            raise QueryExists(name)
        self.state.queries[name] = query
        await self._save()
        log.info("created query %r (threshold %s)", name, query.threshold)
        return query

    async def _probe(self, query: SavedQuery) -> SavedQuery:
        assert query.threshold is not None
        try:
            with trio.fail_after(self.probe_timeout):
                response = await self.client.search(
                    SearchRequest(query.text, limit=self.results_cache.limit,
                                  min_similarity=query.threshold),
                    timeout=self.probe_timeout,
                )
                if response.results or response.suggested_threshold is None:
                    return query
                default = await self.server_default.get(timeout=self.probe_timeout)
        except (errors.KgError, trio.TooSlowError) as exc:
            log.info("creation probe for %r failed, keeping the typed threshold: %s",
                     query.name, exc)
            return query
        if default is None:
            return query
        adjustment = floor_adjust(query.threshold, response.suggested_threshold, default)
        if adjustment is None:
            return query
        log.info("auto-adjusted %r: %s -> %s (suggested %s, server default %s)", query.name,
                 adjustment.from_value, adjustment.to_value, adjustment.suggested, default)
        return replace(query, threshold=adjustment.to_value, auto_adjusted=adjustment)

    async def remove(self, name: str) -> None:
        self.get(name)
        del self.state.queries[name]
        self.results_cache.forget(name)
        await self._save()
        log.info("removed query %r", name)

    async def set_threshold(self, name: str, threshold: float | None) -> SavedQuery:
        """A user-written threshold (None = inherit); never auto-adjusted."""
        query = self.get(name).with_threshold(threshold)
        if query == self.state.queries[name]:
            return query
        self.state.queries[name] = query
        self.results_cache.invalidate(name)
        await self._save()
        log.info("query %r threshold set to %s", name, threshold)
        return query

    # -- persistence ----------------------------------------------------------------------

    def _default_changed(self, previous: float | None, value: float) -> None:
        self.results_cache.invalidate_inheriting()
        self.state.server_default_seen = value
        self._dirty_default = True

    async def _save(self) -> None:
        """Persist the current state; saves are serialised so the last one wins."""
        async with self._save_lock:
            snapshot = copy.copy(self.state)
            snapshot.queries = dict(self.state.queries)
            self._dirty_default = False
            await trio.to_thread.run_sync(self.store.save, snapshot)

    async def save_if_dirty(self) -> None:
        if self._dirty_default:
            await self._save()
