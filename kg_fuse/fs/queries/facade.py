"""Saved queries as the tree uses them: create, remove, change settings, list results,
and the server's default and health as the mount knows them.

The one way into the query layer (the façade): the tree's behaviours and the mount's
poller ask here, never the parts behind it. ``QueryService`` answers for the saved
queries and their listings, its ``server`` (``ServerView``) for the server as the mount
knows it, its ``held`` (``Holdings``) for what the mount holds per query beside its
settings; each stays a handful of methods. It coordinates the parts that
``mount.assemble`` makes: the registry (which queries exist, persisted), the planner
(thresholds, plans, the creation probe), the listings (``ResultCache`` over the queries'
states), the watcher (the server's epoch and default) and the invalidation (what a
change drops, and what the kernel is told). Data flows one way: a fetch or a look at
the server returns what it learned, and this service hands each change to the
invalidation, after the fetch let go of the query's lock. Everything the mount holds per
query lives in one ``QueryState`` each, dropped in one place (``QueryStates.drop``: on
``rmdir``, when the kernel forgets the query's directory, and past the listings' byte
budget). Its errors are typed (see ``kernel.errnos``).
"""

from __future__ import annotations

import logging
from dataclasses import replace

import trio

from kg_fuse.client import errors
from kg_fuse.fs.kernel.nodes import NodeKind
from kg_fuse.fs.queries.invalidation import Invalidation
from kg_fuse.fs.queries.planner import Planner
from kg_fuse.fs.queries.registry import QueryExists, QueryNotFound, QueryRegistry
from kg_fuse.fs.queries.results import Fetched, ResultCache
from kg_fuse.fs.queries.saved import (
    Link,
    QueryPath,
    SavedQuery,
    StoreCorrupt,
    StoreState,
    parse_query_dir_name,
)
from kg_fuse.fs.queries.servers import Opened, ServerIdentity, ServerStores
from kg_fuse.fs.queries.state import Drop, QueryStates, ResultSet
from kg_fuse.fs.queries.watcher import Polled, ServerWatcher
from kg_fuse.listing.explain import ThresholdExplanation
from kg_fuse.listing.thresholds import Threshold, auto_adjustable

log = logging.getLogger(__name__)


class QueryService:
    """Saved queries and their listings; ``server`` the server as the mount knows it,
    ``held`` what the mount holds per query beside its settings."""

    def __init__(self, registry: QueryRegistry, planner: Planner, listings: ResultCache,
                 watcher: ServerWatcher, invalidation: Invalidation,
                 stores: ServerStores) -> None:
        self._registry = registry
        self._stores = stores
        self._planner = planner
        self._listings = listings
        self._states: QueryStates = listings.states
        self._watcher = watcher
        self._invalidation = invalidation
        self.server = ServerView(watcher, invalidation, self._states)
        self.held = Holdings(registry, listings)

    # -- the saved queries ----------------------------------------------------------------

    def find(self, path: QueryPath) -> SavedQuery | None:
        return self._registry.find(path)

    def get(self, path: QueryPath) -> SavedQuery:
        """The saved query at ``path`` (``QueryNotFound`` if there is none)."""
        return self._registry.get(path)

    def children(self, parent: QueryPath) -> list[SavedQuery]:
        return self._registry.children(parent)

    def explain(self, query: SavedQuery) -> ThresholdExplanation:
        """Every threshold that filters the query's listing, and where each comes from."""
        return self._planner.explain(query)

    async def save_if_dirty(self) -> None:
        """Persist what changed since the last save (the learned default, say)."""
        await self._registry.save_if_dirty()

    @property
    def owner(self) -> ServerIdentity:
        """The server whose saved queries the mount shows (its address, while none
        answered yet)."""
        return self._registry.owner

    async def follow_server(self) -> None:
        """After a look at the server: if the server answering is not the one whose
        queries the mount shows (another server answers at this address now), show that
        server's queries instead; the first server to answer also gets the queries
        made before it did. Remembers which server the address is."""
        if not self._watcher.answering:
            return
        identity = self._stores.identify(self._watcher.server_id)
        registry = self._registry
        if identity == registry.owner:
            if registry.provisional:  # the server known by its address answered
                registry.confirm()
                await trio.to_thread.run_sync(self._stores.remember, identity)
            return
        await trio.to_thread.run_sync(self._stores.remember, identity)
        try:
            opened = await trio.to_thread.run_sync(self._stores.open, identity)
        except (StoreCorrupt, OSError) as exc:
            log.error("the saved queries of %s cannot be shown: %s", identity.label, exc)
            opened = Opened(identity, None)
        previous = registry.owner
        provisional = registry.provisional and opened.store is not None
        provisional_store, made_meanwhile = registry.store, registry.state
        clashes = self._stores.adopt(made_meanwhile, opened) if provisional else []
        replaced = await registry.rebind(opened)  # no await since ``adopt``: none missed
        self._invalidation.server_changed(replaced)
        if self._watcher.value is not None:
            registry.remember_default(self._watcher.value, self._watcher.presets)
        if provisional and provisional_store is not None:
            left = StoreState(queries={k: made_meanwhile.queries[k] for k in clashes})
            await trio.to_thread.run_sync(self._stores.settle_provisional,
                                          provisional_store, left)
            await registry.save()
        log.info("showing the %d saved queries of %s (%s)", len(opened.state.queries),
                 identity.label, "the first server to answer at this address" if
                 provisional else f"it answers at this address now, instead of "
                                  f"{previous.label}")

    # -- listings -------------------------------------------------------------------------

    async def results(self, query: SavedQuery) -> ResultSet:
        """The query's listing, fetched if stale (raises KgError without a fallback)."""
        await self._default_known()
        fetched = await self._listings.get(query.key, self._planner.plan(query))
        if (fetched.fetched or fetched.default_seen is not None
                or fetched.presets_seen is not None):
            self._learned(query.key, fetched)  # else a listing held: nothing learned
        return fetched.listing

    async def _default_known(self) -> None:
        """The server default learned, if it never was and the server answers: a
        listing's size follows the band its threshold falls in, which the default draws,
        so a first listing planned without it would be cut to another size than every
        later one (the platform's epoch does not carry the default). Once per mount; a
        server that does not answer costs nothing here (its listing fails or is stale)."""
        if self._watcher.value is None and self._watcher.server_error is None:
            await self.server.learn_default()

    def _learned(self, key: str, fetched: Fetched) -> None:
        """What a fetch learned, handed on (the fetch has let go of the query's lock)."""
        if fetched.fetched:
            self._invalidation.refreshed(key, fetched.previous, fetched.listing)
        self._invalidation.forget(fetched.dropped)
        if ((fetched.default_seen is not None or fetched.presets_seen is not None)
                and self._watcher.observe(fetched.default_seen, fetched.presets_seen)):
            self.server.default_changed(fetched=key)

    async def refresh_status(self, query: SavedQuery) -> None:
        """Before ``.meta/status`` is shown: try to fetch the listing it describes, and
        remember why that failed (``fetch_error``)."""
        try:
            await self.results(query)
        except errors.KgError as exc:
            self._states.get(query.key).fetch_error = str(exc)
        else:
            self._states.get(query.key).fetch_error = None

    def listing(self, key: str) -> ResultSet | None:
        """The listing held now (current or stale), without fetching."""
        return self._states.listing(key)

    def pending(self, query: SavedQuery) -> bool:
        """Whether the listing held was fetched for earlier settings: they changed while
        the server could not be reached, and apply once it answers."""
        listing = self._states.listing(query.key)
        return listing is not None and listing.plan != self._planner.plan(query)

    # -- changing -------------------------------------------------------------------------

    async def create(self, path: QueryPath) -> SavedQuery:
        """Save a query named as typed; ``NAME@0.8`` carries an explicit threshold, which
        the creation-time probe may lower (never below the server default)."""
        if self._registry.find(path) is not None:
            raise QueryExists("/".join(path))
        self._registry.check_writable(path)
        parsed = parse_query_dir_name(path[-1])
        query = SavedQuery(path=path, text=parsed.text, threshold=parsed.threshold)
        if auto_adjustable(query.threshold):
            await self._default_known()
            suggestion = await self._planner.probe(query)
            if suggestion is not None:
                query = self._planner.adjusted(query, suggestion,
                                               await self.server.current_default())
        await self._registry.add(query)
        log.info("created query %r (threshold %s)", query.key, query.threshold)
        return query

    async def remove(self, path: QueryPath) -> None:
        query = await self._registry.remove(path)
        self._invalidation.forget(self._states.drop(query.key, Drop.REMOVED))
        self._listings.drop_unused_details()
        log.info("removed query %r", query.key)

    async def rename(self, old: QueryPath, new: QueryPath) -> list[tuple[str, str]]:
        """``mv OLD NEW`` in one directory: the query keeps its settings, links and
        nested queries; its text follows the new name (and a threshold typed in it, as
        ``NEW@0.8``, replaces the old one). Returns (old key, new key) per query moved;
        their listings are dropped (the texts they search changed), what editors keep
        in their ``.meta`` moves with them."""
        parsed = parse_query_dir_name(new[-1])  # InvalidName, as for mkdir
        query = replace(self._registry.get(old), path=new, text=parsed.text)
        if parsed.threshold is not None:
            query = query.with_threshold(parsed.threshold)
        moved = self._registry.rename(old, query)  # before any await
        for key, new_key in moved:
            held = self._states.find(key)
            self._invalidation.forget(self._states.drop(key, Drop.REMOVED))
            if held is not None:  # editors' scratch files and the files' mtimes go along
                self._states.get(new_key).scratch.update(held.scratch)
                self._states.get(new_key).meta_mtimes.update(held.meta_mtimes)
        await self._registry.save()
        log.info("renamed query %r to %r", "/".join(old), query.key)
        return moved

    async def _update(self, query: SavedQuery, what: str) -> SavedQuery:
        """Store a changed query; its listing and its descendants' are refetched."""
        if self._registry.replace(query):
            self._invalidation.settings_changed(query.key)  # before any await
            await self._registry.save()
            log.info("query %r: %s", query.key, what)
        return query

    async def set_threshold(self, path: QueryPath, threshold: Threshold) -> SavedQuery:
        """A user-written threshold (None = inherit); never auto-adjusted."""
        query = self._registry.get(path).with_threshold(threshold)
        return await self._update(query, f"threshold set to {threshold}")

    async def set_limit(self, path: QueryPath, limit: int | None) -> SavedQuery:
        query = replace(self._registry.get(path), limit=limit)
        return await self._update(query, f"limit {limit}")

    async def set_terms(self, path: QueryPath, kind: str, terms: tuple[str, ...]
                        ) -> SavedQuery:
        """``kind`` is ``exclude`` or ``union``."""
        query = replace(self._registry.get(path), **{kind: terms})
        return await self._update(query, f"{kind} set to {list(terms)}")

    async def add_link(self, path: QueryPath, link: Link) -> SavedQuery:
        query = self._registry.get(path)
        if any(existing.name == link.name for existing in query.links):
            raise QueryExists(f"{query.key}/{link.name}")
        links = (*query.links, link)
        return await self._update(replace(query, links=links), f"linked {link.ontology!r}")

    async def remove_link(self, path: QueryPath, name: str) -> SavedQuery:
        query = self._registry.get(path)
        links = tuple(k for k in query.links if k.name != name)
        if len(links) == len(query.links):
            raise QueryNotFound(f"{query.key}/{name}")
        return await self._update(replace(query, links=links), f"unlinked {name!r}")


class ServerView:
    """The server as this mount knows it (``QueryService.server``): its health, its
    default, and changes of its content; what a look learned goes to the invalidation."""

    def __init__(self, watcher: ServerWatcher, invalidation: Invalidation,
                 states: QueryStates) -> None:
        self._watcher = watcher
        self._invalidation = invalidation
        self._states = states

    async def poll(self) -> bool:
        """One look at the server (the poller's); what changed is handed on. Returns
        whether its content changed."""
        return self._polled(await self._watcher.poll(in_use=bool(self._states.held())))

    async def look(self) -> None:
        """A look at the server now, before ``.meta/status`` is shown."""
        self._polled(await self._watcher.look())

    async def learn_default(self) -> None:
        """The default learned as a poll learns it (the epoch's, else the admin
        endpoint's, else a one-result search), before a listing that needs it."""
        self._polled(await self._watcher.poll(in_use=True))

    def _polled(self, polled: Polled) -> bool:
        if polled.default:
            self.default_changed()
        if polled.back:
            self._invalidation.server_back()
        if polled.content:
            self._invalidation.content_changed()
        return polled.content

    async def current_default(self) -> float | None:
        """The server default, refreshed if older than ``--max-age`` (the last known
        value if the server cannot be reached; None if it never was)."""
        if await self._watcher.refresh_default():
            self.default_changed()
        return self._watcher.value

    def error_since(self, fetched_at: float | None) -> str | None:
        """Why the server could not be reached at the last look, if that look came after
        ``fetched_at`` (see ``ServerWatcher.error_since``)."""
        return self._watcher.error_since(fetched_at)

    def content_changed(self) -> None:
        """The server's content changed through this mount (a document deleted, a file
        ingested): every listing and cache built from it goes stale."""
        self._invalidation.content_changed()

    def default_changed(self, fetched: str | None = None) -> None:
        """The default or its presets changed (``fetched``: the query whose listing was
        just fetched with it, which stays current)."""
        value = self._watcher.value
        if value is not None:
            self._invalidation.default_changed(value, self._watcher.presets, fetched)


class Holdings:
    """What the mount holds per query beside its saved settings (``QueryService.held``):
    the kernel's cache lifetimes, the mtimes of its directory and control files, editors'
    scratch files, the last fetch error, and the memory its listings take."""

    def __init__(self, registry: QueryRegistry, listings: ResultCache) -> None:
        self._registry = registry
        self._listings = listings
        self._states: QueryStates = listings.states

    def fetch_error(self, key: str) -> str | None:
        state = self._states.find(key)
        return state.fetch_error if state is not None else None

    def ttl(self, key: str) -> float:
        """How long the kernel may cache the listing's names and attributes."""
        return self._listings.ttl(key)

    @property
    def nbytes(self) -> int:
        """Bytes held by listings and concept details (within their budgets)."""
        return self._listings.nbytes

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
        if key not in self._registry:
            return False
        self._states.get(key).meta_mtimes[part] = mtime_ns
        return True

    def forgotten(self, key: str) -> None:
        """The kernel forgot the query's directory (so everything below it): its listing
        is dropped (fetched again by the next ``ls``), and its memory handed back."""
        if key in self._registry:
            self._states.drop(key, Drop.FORGOTTEN)
            self._listings.drop_unused_details()

    def tidy(self) -> None:
        """The poller's housekeeping: expired concept details go, freed pages back."""
        self._listings.drop_unused_details(expired_too=True)
        self._states.trim()
