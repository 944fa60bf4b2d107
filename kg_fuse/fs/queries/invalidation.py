"""What a change drops: the one place that decides which listings and caches go stale,
and that tells the kernel to forget what it cached of them.

A change is named here, never decided where it was noticed (whoever notices it, the
query service after a fetch or a poll, or a behaviour that changed the server, calls
the method that names it):

- the server's content changed (a new epoch, a document deleted or ingested through
  the mount): every listing, every concept detail and the catalog;
- the server default or its presets changed (whatever way it was learned): the listings
  that inherit it, and the value is saved with the queries;
- a query's own settings changed: its listing and those of the queries nested in it
  (they are filtered by its threshold too);
- a listing was fetched again, or listings were dropped (``rmdir``, the byte budget):
  the names that left them;
- the server answered again after failing: failed listings may be fetched at once;
- another server answers (another's saved queries are shown): every query shown goes,
  as ``rm -r`` would take it, and everything learned from the old server.

Expiring a listing keeps it as a stale fallback (``QueryStates.expire``); the kernel
forgets its names, so the next path walk asks ``lookup``, which refetches. Notifications
are queued (``KernelCache``) and sent a moment later: this may run inside a ``lookup``,
while the kernel holds the directory's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import pyfuse3

from kg_fuse.fs.kernel.nodes import InodeTable, NodeKind, Owner
from kg_fuse.fs.kernel.notices import KernelCache
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.details import ConceptDetails
from kg_fuse.fs.queries.registry import QueryRegistry
from kg_fuse.fs.queries.saved import SavedQuery, scope_of
from kg_fuse.fs.queries.state import Drop, QueryStates, ResultSet

log = logging.getLogger(__name__)


class Invalidation:
    def __init__(self, registry: QueryRegistry, states: QueryStates,
                 details: ConceptDetails, catalog: Catalog, inodes: InodeTable,
                 kernel: KernelCache) -> None:
        self._registry = registry
        self._states = states
        self._details = details
        self._catalog = catalog
        self._inodes = inodes
        self._kernel = kernel

    def content_changed(self) -> None:
        self.forget(self._states.expire(key for key, _ in self._states.held()))
        self._details.clear()
        self._catalog.invalidate()

    def default_changed(self, value: float, presets: dict[str, float] | None,
                        fetched: str | None = None) -> None:
        """``fetched``: the query whose listing was just fetched with the new default
        (it is current: it stays)."""
        self.forget(self._states.expire(
            key for key, listing in self._states.held()
            if key != fetched
            and any(level.min_similarity is None for level in listing.plan.levels)))
        self._registry.remember_default(value, presets)

    def settings_changed(self, key: str) -> None:
        self.forget(self._states.expire(self._registry.subtree(key)))

    def server_changed(self, replaced: list[SavedQuery]) -> None:
        """Another server's queries replaced ``replaced``: the kernel forgets their
        names and their inodes go (a query of the same name is another query now)."""
        parents = [(self._parent_inode(query), query) for query in replaced]
        for parent, query in parents:
            self.forget(self._states.drop(query.key, Drop.REMOVED))
            if parent is not None:
                self._kernel.forget_name(parent, query.name)
        for query in replaced:
            self._inodes.detach_owner(Owner.QUERY, query.key)
        self.content_changed()

    def _parent_inode(self, query: SavedQuery) -> int | None:
        """The inode of the directory the query's name is in, if the kernel holds it."""
        if query.parent_key is not None:
            parent = self._inodes.find(NodeKind.QUERY_DIR, query.parent_key)
        elif (ontology := scope_of(query.path)) is not None:
            parent = self._inodes.find(NodeKind.ONTOLOGY_DIR, ontology)
        else:
            return pyfuse3.ROOT_INODE
        return parent.inode if parent is not None else None

    def server_back(self) -> None:
        self._states.server_back()

    def refreshed(self, key: str, old: ResultSet | None, new: ResultSet) -> None:
        """A listing was fetched again: the kernel forgets the names that left it and the
        pages and sizes of results whose bytes changed."""
        directory = self._inodes.find(NodeKind.QUERY_DIR, key)
        if old is not None and directory is not None:
            for name in old.files.keys() - new.files.keys():
                self._kernel.forget_name(directory.inode, name)
        for found in new.files.values():
            node = self._inodes.find(NodeKind.RESULT_FILE, key, found.concept_id)
            if node is not None and node.last_body and node.last_body != found.body:
                self._kernel.forget_content(node.inode)
        self._kernel.flush_soon()

    def forget(self, listings: Iterable[tuple[str, ResultSet]]) -> None:
        """Listings that may have changed or were dropped: the kernel forgets their
        names."""
        for key, listing in listings:
            directory = self._inodes.find(NodeKind.QUERY_DIR, key)
            if directory is not None:
                for name in listing.files:
                    self._kernel.forget_name(directory.inode, name)
        self._kernel.flush_soon()
