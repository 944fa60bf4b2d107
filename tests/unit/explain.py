"""A single (not nested) query's threshold explanation, for rendering tests."""

from __future__ import annotations

from kg_fuse.fs.queries.saved import SavedQuery
from kg_fuse.listing.explain import DefaultOrigin, ThresholdExplanation, explain_thresholds


def explain_one(query: SavedQuery, default: float | None) -> ThresholdExplanation:
    return explain_thresholds([query], query.union, query.exclude, DefaultOrigin(default))
