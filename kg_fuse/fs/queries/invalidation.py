"""What a change drops: the one place that decides which listings and caches go stale.

A change is named here, never decided where it was noticed:

- the server's content changed (a new epoch, a document deleted or ingested through
  the mount): every listing, every concept detail and the catalog;
- the server default or its presets changed (whatever way it was learned): the listings
  that inherit it, and the value is saved with the queries;
- a query's own settings changed: its listing and those of the queries nested in it
  (they are filtered by its threshold too);
- the server answered again after failing: failed listings may be fetched at once.

Expiring a listing keeps it as a stale fallback and tells the kernel to forget its
names (``QueryStates.expire``).
"""

from __future__ import annotations

import logging

from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.details import ConceptDetails
from kg_fuse.fs.queries.registry import QueryRegistry
from kg_fuse.fs.queries.state import QueryStates

log = logging.getLogger(__name__)


class Invalidation:
    def __init__(self, registry: QueryRegistry, states: QueryStates,
                 details: ConceptDetails, catalog: Catalog) -> None:
        self._registry = registry
        self._states = states
        self._details = details
        self._catalog = catalog

    def content_changed(self) -> None:
        self._states.expire(key for key, _ in self._states.held())
        self._details.clear()
        self._catalog.invalidate()

    def default_changed(self, value: float, presets: dict[str, float] | None) -> None:
        self._states.expire(
            key for key, listing in self._states.held()
            if any(level.min_similarity is None for level in listing.plan.levels))
        self._registry.remember_default(value, presets)

    def settings_changed(self, key: str) -> None:
        self._states.expire(self._registry.subtree(key))

    def server_back(self) -> None:
        self._states.server_back()
