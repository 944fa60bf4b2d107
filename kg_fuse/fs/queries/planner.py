"""A saved query handed to the threshold rules (``kg_fuse.listing``): its chain of
enclosing queries and the watcher's default explained, its plan, and the creation-time
probe whose suggestion the rules floor at the server default.

Pure over the registry, the watcher's default and the catalog's names, except for the
probe (the query's listing, under its own deadline): no state of its own.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.registry import QueryRegistry
from kg_fuse.fs.queries.saved import QueryPath, SavedQuery, scope_of
from kg_fuse.fs.queries.watcher import ServerWatcher
from kg_fuse.listing.execute import execute
from kg_fuse.listing.explain import ThresholdExplanation, explain_thresholds
from kg_fuse.listing.plan import QueryPlan, plan_listing
from kg_fuse.listing.thresholds import EffectiveThreshold, floor_adjust

log = logging.getLogger(__name__)


class Planner:
    def __init__(self, client: KgApiClient, registry: QueryRegistry, watcher: ServerWatcher,
                 catalog: Catalog | None = None) -> None:
        """``catalog``: an ontology directory's name -> the server's name (the same
        without one)."""
        self._client = client
        self._registry = registry
        self._watcher = watcher
        self._catalog = catalog

    def explain(self, query: SavedQuery) -> ThresholdExplanation:
        """Every threshold that filters the query's listing, and where each comes from."""
        return explain_thresholds(self._registry.chain(query), query.union, query.exclude,
                                  self._watcher.origin)

    def effective(self, query: SavedQuery) -> EffectiveThreshold:
        """The query's own threshold (its level; enclosing levels filter too)."""
        return self.explain(query).own.effective

    def scope(self, path: QueryPath) -> str | None:
        """The server's name of the ontology a scoped query searches in."""
        scope = scope_of(path)
        if scope is None or self._catalog is None:
            return scope
        return self._catalog.server_name(scope)

    def plan(self, query: SavedQuery) -> QueryPlan:
        """What the listing searches: each level at the threshold ``explain`` gives it,
        in its scope's ontology or its links' (every ontology without either)."""
        scope = self.scope(query.path)
        ontologies = [(scope,) if scope is not None else
                      tuple(sorted({link.ontology for link in saved.links}))
                      for saved in self._registry.chain(query)]
        return plan_listing(self.explain(query), ontologies, query.limit)

    async def probe(self, query: SavedQuery) -> float | None:
        """A new ``NAME@0.8`` query: when nothing reaches its threshold, the suggestion
        ``.meta/status`` shows (just below the best near miss, in its scope); None when
        something does, or the probe failed (the query stays as typed). The probe is the
        query's own listing, so a scope is applied as a listing applies it."""
        assert isinstance(query.threshold, float)
        plan = self.plan(query)
        try:
            with trio.fail_after(self._watcher.probe_timeout):
                outcome = await execute(self._client, plan)
        except (errors.KgError, trio.TooSlowError) as exc:
            log.info("creation probe for %r failed, keeping the typed threshold: %s",
                     query.key, exc)
            return None
        own = outcome.levels[len(plan.levels) - 1]
        return None if own.matches else outcome.primary.suggestion

    def adjusted(self, query: SavedQuery, suggestion: float, default: float | None
                 ) -> SavedQuery:
        """The probed query lowered to the suggestion, never below the server default
        (as typed while the default is unknown)."""
        assert isinstance(query.threshold, float)
        adjustment = floor_adjust(query.threshold, suggestion, default)
        if adjustment is None:
            return query
        log.info("auto-adjusted %r: %s -> %s (suggested %s, server default %s)", query.key,
                 adjustment.from_value, adjustment.to_value, adjustment.suggested, default)
        return replace(query, threshold=adjustment.to_value, auto_adjusted=adjustment)
