"""Saved queries as the tree uses them: create, remove, change settings, list results.

The domain layer under the FUSE operations: it knows nothing about inodes or errnos (its
errors are typed: see ``kernel.errnos``). It coordinates the parts that ``mount.assemble``
wires: the registry (which queries exist, persisted), the planner (thresholds, plans,
the creation probe), the listings (``ResultCache`` over the queries' states) and the
invalidation (what a change drops). Everything the mount holds per query lives in one
``QueryState`` each, dropped in one place (``QueryStates.drop``: on ``rmdir``, when the
kernel forgets the query's directory, and past the listings' byte budget).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kg_fuse.client import errors
from kg_fuse.fs.kernel.nodes import NodeKind
from kg_fuse.fs.queries.invalidation import Invalidation
from kg_fuse.fs.queries.planner import Planner
from kg_fuse.fs.queries.registry import QueryExists, QueryNotFound, QueryRegistry
from kg_fuse.fs.queries.results import ResultCache
from kg_fuse.fs.queries.state import Drop, QueryStates, ResultSet
from kg_fuse.fs.queries.store import Link, QueryPath, SavedQuery, parse_query_dir_name
from kg_fuse.fs.queries.threshold import Threshold

log = logging.getLogger(__name__)


class QueryService:
    def __init__(self, registry: QueryRegistry, planner: Planner, listings: ResultCache,
                 invalidation: Invalidation) -> None:
        self.registry = registry
        self.planner = planner
        self._listings = listings
        self._states: QueryStates = listings.states
        self._invalidation = invalidation

    # -- listings -------------------------------------------------------------------------

    async def results(self, query: SavedQuery) -> ResultSet:
        """The query's listing, fetched if stale (raises KgError without a fallback)."""
        return await self._listings.get(query.key, self.planner.plan(query))

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

    def listing(self, key: str) -> ResultSet | None:
        """The listing held now (current or stale), without fetching."""
        return self._states.listing(key)

    def ttl(self, key: str) -> float:
        """How long the kernel may cache the listing's names and attributes."""
        return self._listings.ttl(key)

    @property
    def cache_bytes(self) -> int:
        """Bytes held by listings and concept details (within their budgets)."""
        return self._listings.nbytes

    # -- what the mount holds per query -------------------------------------------------

    def scratch(self, key: str) -> dict[str, bytearray]:
        """Editors' temporary files in the query's ``.meta`` (kept with its state)."""
        return self._states.get(key).scratch

    def meta_mtime_ns(self, key: str, part: NodeKind | None = None) -> int | None:
        """When a query's directory (``part`` None) or one of its control files (its
        kind) last changed; None if never, or if ``key`` is no query."""
        state = self._states.find(key)
        return state.meta_mtimes.get(part) if state is not None else None

    def touch(self, key: str, mtime_ns: int, part: NodeKind | None = None) -> bool:
        """Record a change (see ``meta_mtime_ns``); False if ``key`` is no query."""
        if key not in self.registry:
            return False
        self._states.get(key).meta_mtimes[part] = mtime_ns
        return True

    def forgotten(self, key: str) -> None:
        """The kernel forgot the query's directory (so everything below it): its listing
        is dropped (fetched again by the next ``ls``), and its memory handed back."""
        if key in self.registry:
            self._states.drop(key, Drop.FORGOTTEN)
            self._listings.drop_unused_details()

    def tidy(self) -> None:
        """The poller's housekeeping: expired concept details go, freed pages back."""
        self._listings.drop_unused_details(expired_too=True)
        self._states.trim()

    # -- changing -------------------------------------------------------------------------

    async def create(self, path: QueryPath) -> SavedQuery:
        """Save a query named as typed; ``NAME@0.8`` carries an explicit threshold, which
        the creation-time probe may lower (never below the server default)."""
        if self.registry.find(path) is not None:
            raise QueryExists("/".join(path))
        parsed = parse_query_dir_name(path[-1])
        query = SavedQuery(path=path, text=parsed.text, threshold=parsed.threshold)
        if isinstance(query.threshold, float):  # presets follow the default: no probe
            query = await self.planner.probe(query)
        await self.registry.add(query)
        log.info("created query %r (threshold %s)", query.key, query.threshold)
        return query

    async def remove(self, path: QueryPath) -> None:
        query = await self.registry.remove(path)
        self._states.drop(query.key, Drop.REMOVED)
        self._listings.drop_unused_details()
        log.info("removed query %r", query.key)

    async def _update(self, query: SavedQuery, what: str) -> SavedQuery:
        """Store a changed query; its listing and its descendants' are refetched."""
        if self.registry.replace(query):
            self._invalidation.settings_changed(query.key)  # before any await
            await self.registry.save()
            log.info("query %r: %s", query.key, what)
        return query

    async def set_threshold(self, path: QueryPath, threshold: Threshold) -> SavedQuery:
        """A user-written threshold (None = inherit); never auto-adjusted."""
        query = self.registry.get(path).with_threshold(threshold)
        return await self._update(query, f"threshold set to {threshold}")

    async def set_limit(self, path: QueryPath, limit: int | None) -> SavedQuery:
        query = replace(self.registry.get(path), limit=limit)
        return await self._update(query, f"limit {limit}")

    async def set_terms(self, path: QueryPath, kind: str, terms: tuple[str, ...]
                        ) -> SavedQuery:
        """``kind`` is ``exclude`` or ``union``."""
        query = replace(self.registry.get(path), **{kind: terms})
        return await self._update(query, f"{kind} set to {list(terms)}")

    async def add_link(self, path: QueryPath, link: Link) -> SavedQuery:
        query = self.registry.get(path)
        if any(existing.name == link.name for existing in query.links):
            raise QueryExists(f"{query.key}/{link.name}")
        links = (*query.links, link)
        return await self._update(replace(query, links=links), f"linked {link.ontology!r}")

    async def remove_link(self, path: QueryPath, name: str) -> SavedQuery:
        query = self.registry.get(path)
        links = tuple(k for k in query.links if k.name != name)
        if len(links) == len(query.links):
            raise QueryNotFound(f"{query.key}/{name}")
        return await self._update(replace(query, links=links), f"unlinked {name!r}")
