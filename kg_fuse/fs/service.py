"""Saved queries as a service: create, remove, change settings, fetch results.

This is the domain layer under the FUSE operations, and the façade over everything the
mount holds per query: it knows nothing about inodes or errnos (its errors are typed:
see ``errors``), and nothing outside
reaches into its caches. Queries are identified by their path from the mount root
(``("gzip",)``, ``("gzip", "levels")``, ``("ontology", "Data Compression and
Archiving", "gzip")``); their runtime state (listing, names, mtimes, negative cache,
scratch files) lives in one ``QueryState`` each, dropped in one place
(``QueryStates.drop``: on ``rmdir``, when the kernel forgets the query's directory, and
past the listings' byte budget).

Constructing one needs only a client, a store and its loaded state::

    service = QueryService(KgApiClient(url, token), QueryStore(dir), QueryStore(dir).load())

(inside a trio run: it makes trio locks). ``poll()`` is what the mount's background
task calls every ``poll_interval``; nothing else runs on its own.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient, SearchRequest
from kg_fuse.fs.errors import Exists, NoEntry, NotEmpty
from kg_fuse.fs.names import parse_query_dir_name
from kg_fuse.fs.plan import Level, QueryPlan
from kg_fuse.fs.queries import (
    Link,
    QueryPath,
    QueryStore,
    SavedQuery,
    StoreState,
    query_key,
    scope_of,
)
from kg_fuse.fs.query_state import Drop, QueryStates, StaleListener
from kg_fuse.fs.results import RefreshListener, ResultCache, ResultSet
from kg_fuse.fs.server_default import ServerDefault
from kg_fuse.fs.threshold import (
    EffectiveThreshold,
    Threshold,
    ThresholdExplanation,
    explain_thresholds,
    floor_adjust,
)

log = logging.getLogger(__name__)


class QueryExists(Exists):
    """A query with this path is already saved."""


class QueryNotFound(NoEntry):
    """No saved query has this path."""


class QueryNotEmpty(NotEmpty):
    """The query still has nested queries."""


class QueryService:
    def __init__(
        self,
        client: KgApiClient,
        store: QueryStore,
        state: StoreState,
        *,
        poll_interval: float = 5.0,
        max_age: float = 60.0,
        probe_timeout: float = 2.0,
        on_refresh: RefreshListener | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.state = state
        self.probe_timeout = probe_timeout
        self.server_default = ServerDefault(
            client, max_age, state.server_default_seen, on_change=self._default_changed,
            presets=state.server_presets_seen,
        )
        self._states = QueryStates()
        self._results = ResultCache(client, max_age, self._states, on_refresh=on_refresh,
                                    on_default=self.server_default.observe,
                                    retry_after=min(poll_interval, 5.0))
        self.server_error: str | None = None
        # an ontology directory's name -> the server's name (set by the mount)
        self.ontology_name: Callable[[str], str] = lambda name: name
        self._epoch: int | None = None
        self._save_lock = trio.Lock()
        self._dirty_default = False
        self._children: dict[str, set[str]] = {}
        for key, query in state.queries.items():
            self._index(query.path, key)

    # -- reading ------------------------------------------------------------------------

    def _index(self, path: QueryPath, key: str) -> None:
        self._children.setdefault(query_key(path[:-1]), set()).add(key)

    def children(self, parent: QueryPath) -> list[SavedQuery]:
        """The queries directly inside ``parent`` (``()`` for the root)."""
        keys = self._children.get(query_key(parent), set())
        return sorted((self.state.queries[k] for k in keys), key=lambda q: q.name)

    def find(self, path: QueryPath) -> SavedQuery | None:
        return self.state.queries.get(query_key(path))

    def get(self, path: QueryPath) -> SavedQuery:
        query = self.find(path)
        if query is None:
            raise QueryNotFound("/".join(path))
        return query

    def chain(self, query: SavedQuery) -> list[SavedQuery]:
        """The query's enclosing queries, outermost first, then the query itself."""
        chain = [query]
        while chain[0].parent_key is not None:
            chain.insert(0, self.state.queries[chain[0].parent_key])
        return chain

    def explain(self, query: SavedQuery) -> ThresholdExplanation:
        """Every threshold that filters the query's listing, and where each comes from."""
        return explain_thresholds(self.chain(query), query.union, query.exclude,
                                  self.server_default.origin)

    def effective(self, query: SavedQuery) -> EffectiveThreshold:
        """The query's own threshold (its level; enclosing levels filter too)."""
        return self.explain(query).own.effective

    def _scope(self, path: QueryPath) -> str | None:
        """The server's name of the ontology a scoped query searches in."""
        scope = scope_of(path)
        return None if scope is None else self.ontology_name(scope)

    def plan(self, query: SavedQuery) -> QueryPlan:
        """What the listing searches: each level at the threshold ``explain`` gives it."""
        scope = self._scope(query.path)
        levels = []
        for saved, explained in zip(self.chain(query), self.explain(query).chain,
                                    strict=True):
            ontologies = tuple(sorted({link.ontology for link in saved.links}))
            if scope is not None:
                ontologies = (scope,)
            levels.append(Level(saved.text, explained.effective.min_similarity, ontologies))
        return QueryPlan(tuple(levels), query.effective_limit, query.union, query.exclude)

    async def current_default(self) -> float | None:
        """The server default, refreshed if stale (briefly cached; see ServerDefault)."""
        return await self.server_default.get(timeout=self.probe_timeout)

    async def results(self, query: SavedQuery) -> ResultSet:
        """The query's listing, fetched if stale (raises KgError without a fallback)."""
        return await self._results.get(query.key, self.plan(query))

    async def refresh_status(self, query: SavedQuery) -> None:
        """Before ``.meta/status`` is shown: try to fetch the listing it describes, and
        remember why that failed (``fetch_error``)."""
        try:
            await self.results(query)
        except errors.KgError as exc:
            self._states.get(query.key).fetch_error = str(exc)
        else:
            self._states.get(query.key).fetch_error = None

    def fetch_error(self, key: str) -> str | None:
        state = self._states.find(key)
        return state.fetch_error if state is not None else None

    # -- what the mount holds per query (the façade over the states) --------------------

    def listing(self, key: str) -> ResultSet | None:
        """The listing held now (current or stale), without fetching."""
        return self._states.listing(key)

    def ttl(self, key: str) -> float:
        """How long the kernel may cache the listing's names and attributes."""
        return self._results.ttl(key)

    def listen(self, on_refresh: RefreshListener | None = None,
               on_stale: StaleListener | None = None) -> None:
        """The mount's hooks: a listing was refetched; a listing's names may be stale."""
        self._results.on_refresh = on_refresh
        self._states.on_stale = on_stale

    def scratch(self, key: str) -> dict[str, bytearray]:
        """Editors' temporary files in the query's ``.meta`` (kept with its state)."""
        return self._states.get(key).scratch

    def meta_mtime_ns(self, owner: str) -> int | None:
        """When a query's directory (``owner`` is its key) or one of its control files
        (``key\0kind``) last changed; None if never, or if ``owner`` is no query."""
        key, _, part = owner.partition("\0")
        state = self._states.find(key)
        return state.meta_mtimes.get(part) if state is not None else None

    def touch(self, owner: str, mtime_ns: int) -> bool:
        """Record a change (see ``meta_mtime_ns``); False if ``owner`` is no query."""
        key, _, part = owner.partition("\0")
        if key not in self.state.queries:
            return False
        self._states.get(key).meta_mtimes[part] = mtime_ns
        return True

    def forgotten(self, key: str) -> None:
        """The kernel forgot the query's directory (so everything below it): its listing
        is dropped (fetched again by the next ``ls``), and its memory handed back."""
        if key in self.state.queries:
            self._states.drop(key, Drop.FORGOTTEN)
            self._drop_unused_details()

    def _drop_unused_details(self, expired_too: bool = False) -> None:
        self._states.dropped(self._results.drop_unused_details(expired_too))

    def content_changed(self) -> None:
        """The server's content changed (epoch, a deleted document): every listing and
        concept detail is refetched on next use."""
        self._results.invalidate_all()

    @property
    def cache_bytes(self) -> int:
        """Bytes held by listings and concept details (within their budgets)."""
        return self._results.nbytes

    # -- watching the server -------------------------------------------------------------

    async def poll(self) -> bool:
        """One look at the server: a changed epoch drops every cached listing (the next
        ``ls`` refetches), and the default is re-learned (a change drops the listings of
        inheriting queries). Returns whether the content changed."""
        self._drop_unused_details(expired_too=True)
        self._states.trim()
        try:
            seen = await self.client.epoch(timeout=self.probe_timeout)
            await self.server_default.polled(seen, timeout=self.probe_timeout)
        except errors.KgError as exc:
            if self.server_error is None:
                log.warning("server unavailable, serving cached listings: %s", exc)
            self.server_error = str(exc)
            return False
        if self.server_error is not None:
            log.info("server available again")
            self._results.server_back()
        self.server_error = None
        changed = self._epoch is not None and seen.epoch != self._epoch
        if changed:
            log.info("server content changed (epoch %s -> %s)", self._epoch, seen.epoch)
            self.content_changed()
        self._epoch = seen.epoch
        await self.save_if_dirty()
        return changed

    # -- changing -------------------------------------------------------------------------

    async def create(self, path: QueryPath) -> SavedQuery:
        """Save a query named as typed; ``NAME@0.8`` carries an explicit threshold, which
        the creation-time probe may lower (never below the server default)."""
        if self.find(path) is not None:
            raise QueryExists("/".join(path))
        parsed = parse_query_dir_name(path[-1])
        query = SavedQuery(path=path, text=parsed.text, threshold=parsed.threshold)
        if isinstance(query.threshold, float):  # presets follow the default: no probe
            query = await self._probe(query)
        if self.find(path) is not None:  # created concurrently while we probed
            raise QueryExists("/".join(path))
        self.state.queries[query.key] = query
        self._index(path, query.key)
        await self._save()
        log.info("created query %r (threshold %s)", query.key, query.threshold)
        return query

    async def _probe(self, query: SavedQuery) -> SavedQuery:
        assert isinstance(query.threshold, float)
        scope = self._scope(query.path)
        try:
            with trio.fail_after(self.probe_timeout):
                response = await self.client.search(
                    SearchRequest(query.text, limit=min(query.effective_limit, 100),
                                  min_similarity=query.threshold, ontology=scope),
                    timeout=self.probe_timeout,
                )
                if response.results or response.suggested_threshold is None:
                    return query
                default = await self.server_default.get(timeout=self.probe_timeout)
        except (errors.KgError, trio.TooSlowError) as exc:
            log.info("creation probe for %r failed, keeping the typed threshold: %s",
                     query.key, exc)
            return query
        if default is None:
            return query
        adjustment = floor_adjust(query.threshold, response.suggested_threshold, default)
        if adjustment is None:
            return query
        log.info("auto-adjusted %r: %s -> %s (suggested %s, server default %s)", query.key,
                 adjustment.from_value, adjustment.to_value, adjustment.suggested, default)
        return replace(query, threshold=adjustment.to_value, auto_adjusted=adjustment)

    async def remove(self, path: QueryPath) -> None:
        query = self.get(path)
        if self._children.get(query.key):
            raise QueryNotEmpty(query.key)
        del self.state.queries[query.key]
        self._children.get(query_key(path[:-1]), set()).discard(query.key)
        self._children.pop(query.key, None)
        self._states.drop(query.key, Drop.REMOVED)
        self._drop_unused_details()
        await self._save()
        log.info("removed query %r", query.key)

    async def _update(self, query: SavedQuery, what: str) -> SavedQuery:
        """Store a changed query; its listing and its descendants' are refetched."""
        if query == self.state.queries.get(query.key):
            return query
        self.state.queries[query.key] = query
        for key in self._subtree(query.key):
            self._results.invalidate(key)
        await self._save()
        log.info("query %r: %s", query.key, what)
        return query

    def _subtree(self, key: str) -> list[str]:
        keys, pending = [], [key]
        while pending:
            current = pending.pop()
            keys.append(current)
            pending.extend(self._children.get(current, ()))
        return keys

    async def set_threshold(self, path: QueryPath, threshold: Threshold) -> SavedQuery:
        """A user-written threshold (None = inherit); never auto-adjusted."""
        query = self.get(path).with_threshold(threshold)
        return await self._update(query, f"threshold set to {threshold}")

    async def set_limit(self, path: QueryPath, limit: int | None) -> SavedQuery:
        return await self._update(replace(self.get(path), limit=limit), f"limit {limit}")

    async def set_terms(self, path: QueryPath, kind: str, terms: tuple[str, ...]
                        ) -> SavedQuery:
        """``kind`` is ``exclude`` or ``union``."""
        query = replace(self.get(path), **{kind: terms})
        return await self._update(query, f"{kind} set to {list(terms)}")

    async def add_link(self, path: QueryPath, link: Link) -> SavedQuery:
        query = self.get(path)
        if any(existing.name == link.name for existing in query.links):
            raise QueryExists(f"{query.key}/{link.name}")
        links = (*query.links, link)
        return await self._update(replace(query, links=links), f"linked {link.ontology!r}")

    async def remove_link(self, path: QueryPath, name: str) -> SavedQuery:
        query = self.get(path)
        links = tuple(k for k in query.links if k.name != name)
        if len(links) == len(query.links):
            raise QueryNotFound(f"{query.key}/{name}")
        return await self._update(replace(query, links=links), f"unlinked {name!r}")

    # -- persistence ----------------------------------------------------------------------

    def _default_changed(self, previous: float | None, value: float) -> None:
        self._results.invalidate_inheriting()
        self.state.server_default_seen = value
        self.state.server_presets_seen = self.server_default.presets
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
