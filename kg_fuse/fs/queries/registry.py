"""The saved queries: which exist, how they nest, and their persistence.

Queries are identified by their path from the mount root (``("gzip",)``, ``("gzip",
"levels")``, ``("ontology", "Data Compression and Archiving", "gzip")``). The registry
holds them with an index of each query's children, and writes them (with the server
default last seen) to the store after every change, before the change is acknowledged.
They are one server's (``owner``, see :mod:`.servers`): when the mount learns that
another server answers, ``rebind`` puts that server's in their place. It knows nothing
about listings or the kernel.
"""

from __future__ import annotations

import copy
import dataclasses
import logging

import trio

from kg_fuse.fs.kernel.errnos import Exists, NoEntry, NotEmpty, TryAgain
from kg_fuse.fs.queries.saved import QueryPath, QueryStore, SavedQuery, StoreState, query_key
from kg_fuse.fs.queries.servers import Opened, ServerIdentity

log = logging.getLogger(__name__)


class QueryExists(Exists):
    """A query with this path is already saved."""


class QueryNotFound(NoEntry):
    """No saved query has this path."""


class QueryNotEmpty(NotEmpty):
    """The query still has nested queries."""


class StoreHeld(TryAgain):
    """The server that answers has a saved-query store this mount could not read (it
    was set aside): nothing is saved for it until a mount settles that (the refusal
    the next ``kg-fuse mount`` prints says how)."""


class QueryRegistry:
    """One server's saved queries by key, their child index, and the store they persist
    to (inside a trio run: it makes a trio lock)."""

    def __init__(self, opened: Opened) -> None:
        self.owner: ServerIdentity = opened.owner
        self.store: QueryStore | None = opened.store
        self.state = opened.state
        self.provisional = opened.provisional  # no server answered yet: see ``servers``
        self._save_lock = trio.Lock()
        self._dirty = False
        self._children: dict[str, set[str]] = {}
        self._reindex()

    def _reindex(self) -> None:
        self._children = {}
        for key, query in self.state.queries.items():
            self._index(query.path, key)

    def _index(self, path: QueryPath, key: str) -> None:
        self._children.setdefault(query_key(path[:-1]), set()).add(key)

    # -- reading ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.state.queries)

    def __contains__(self, key: str) -> bool:
        return key in self.state.queries

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

    def subtree(self, key: str) -> list[str]:
        """The key and the keys of every query nested in it (their listings include its
        threshold: a change to it changes theirs)."""
        keys, pending = [], [key]
        while pending:
            current = pending.pop()
            keys.append(current)
            pending.extend(self._children.get(current, ()))
        return keys

    # -- changing (persisted before it returns, but for ``replace``) ------------------

    def check_writable(self, path: QueryPath) -> None:
        """A query can be saved only where its server's store could be read."""
        if self.store is None:
            raise StoreHeld(f"the saved queries of {self.owner.label} are unreadable: "
                            f"{query_key(path)!r} not saved")

    async def add(self, query: SavedQuery) -> None:
        self.check_writable(query.path)
        if query.key in self.state.queries:  # created concurrently (e.g. while probing)
            raise QueryExists(query.key)
        self.state.queries[query.key] = query
        self._index(query.path, query.key)
        await self.save()

    async def remove(self, path: QueryPath) -> SavedQuery:
        query = self.get(path)
        if self._children.get(query.key):
            raise QueryNotEmpty(query.key)
        del self.state.queries[query.key]
        self._children.get(query_key(path[:-1]), set()).discard(query.key)
        self._children.pop(query.key, None)
        await self.save()
        return query

    def rename(self, old: QueryPath, renamed: SavedQuery) -> list[tuple[str, str]]:
        """Move the query at ``old``, with every query nested in it, to ``renamed.path``
        (in memory, at once: the caller saves). Returns (old key, new key) per query
        moved, the renamed one first."""
        if renamed.key in self.state.queries:
            raise QueryExists(renamed.key)
        top = self.get(old)
        moved = []
        for key in self.subtree(top.key):
            query = self.state.queries.pop(key)
            path = renamed.path + query.path[len(old):]
            self.state.queries[query_key(path)] = (
                renamed if key == top.key else dataclasses.replace(query, path=path))
            moved.append((key, query_key(path)))
        self._reindex()
        return moved

    def replace(self, query: SavedQuery) -> bool:
        """Changed settings of a saved query (the caller saves); False when unchanged."""
        if query == self.state.queries.get(query.key):
            return False
        self.state.queries[query.key] = query
        return True

    def remember_default(self, value: float | None, presets: dict[str, float] | None
                         ) -> None:
        """The server default changed: saved with the next save (``save_if_dirty``)."""
        self.state.server_default_seen = value
        self.state.server_presets_seen = presets
        self._dirty = True

    async def save(self) -> None:
        """Persist the current state; saves are serialised so the last one wins."""
        async with self._save_lock:
            store, snapshot = self.store, _snapshot(self.state)
            self._dirty = False
            if store is not None:
                await trio.to_thread.run_sync(store.save, snapshot)

    def confirm(self) -> None:
        """The server answered as the owner taken provisionally (known by its address)."""
        self.provisional = False

    async def rebind(self, opened: Opened) -> list[SavedQuery]:
        """Another server answers: its queries replace these (at once, before any
        await), which are saved to their own store. Returns the queries replaced (not
        one the new ones hold as it is)."""
        old_owner, old_store, old_state = self.owner, self.store, self.state
        self.owner, self.store, self.state = opened.owner, opened.store, opened.state
        self.provisional = opened.provisional
        self._reindex()
        self._dirty = False
        async with self._save_lock:  # after any save under way of the old ones
            if old_store is not None:
                try:
                    await trio.to_thread.run_sync(old_store.save, _snapshot(old_state))
                except OSError as exc:  # the mount goes on with the new server's
                    log.error("could not save the saved queries of %s to %s: %s",
                              old_owner.label, old_store.path, exc)
        return [query for key, query in old_state.queries.items()
                if self.state.queries.get(key) != query]

    async def save_if_dirty(self) -> None:
        if self._dirty:
            await self.save()


def _snapshot(state: StoreState) -> StoreState:
    """A copy to save from a thread while the loop goes on changing the queries."""
    snapshot = copy.copy(state)
    snapshot.queries = dict(state.queries)
    return snapshot
