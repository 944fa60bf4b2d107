"""How a query directory becomes a list of concepts.

A query is a chain of levels (a nested query's ancestors, then itself). Each level's term
is searched at that level's own effective threshold and restricted to that level's
ontologies (its scope or links, OR between links). A concept is listed when it matches
every level (AND); its combined score is the *lowest* of its level scores, so a concept
ranks as high as its weakest match. Union terms then add their matches (at the query's
own threshold, scored by that term), exclude terms remove theirs, and the list is cut at
the query's limit, or earlier where the scores fall away from the best one (``cut.py``:
inheriting and preset thresholds only; an explicit threshold lists everything above it).

A score of 0 is no match: such hits are dropped (the embedded server lists none, even
at threshold 0). Paging: the search API returns at most 100 results a call, so larger
wants page with ``offset``. A scoped page can come back short on the platform (it
filters after paging), so scoped paging only stops at an empty page, the want, or a scan
cap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import PAGE_SIZE_MAX, KgApiClient, SearchRequest
from kg_fuse.client.models import ConceptHit, SearchResponse
from kg_fuse.fs.queries.cut import Cut, relevance_cut

log = logging.getLogger(__name__)

MAX_MATCHES = 1000  # the most matches fetched for one term (intersections need depth)
MAX_SCAN = 2000  # how far scoped paging may go looking past short pages


@dataclass(frozen=True)
class Level:
    text: str
    min_similarity: float | None  # None: omit, the server default applies
    ontologies: tuple[str, ...] = ()  # empty: every ontology


@dataclass(frozen=True)
class QueryPlan:
    """Everything that decides a listing; equal plans give equal listings."""

    levels: tuple[Level, ...]
    limit: int
    union: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    size: int | None = None  # the preset's listing size; None: all above the thresholds

    @property
    def own(self) -> Level:
        return self.levels[-1]


@dataclass(frozen=True)
class LevelCount:
    """How one level or term shaped a listing: ``role`` is ``level`` (by position in
    the plan's levels), ``union`` or ``exclude``; ``matches`` is how many concepts it
    matched at its threshold (up to the depth fetched); ``changed`` how many of the
    query's own matches it removed (an enclosing level, an exclude term) or how many
    concepts it added (a union term)."""

    role: str
    text: str
    matches: int
    changed: int = 0


@dataclass
class PlanOutcome:
    hits: list[ConceptHit]
    primary: SearchResponse  # the first page of the query's own term: hints, threshold
    default_seen: float | None  # threshold_used of an inheriting search, if any ran
    levels: tuple[LevelCount, ...] = ()  # plan.levels in order, then union, exclude
    presets_seen: dict[str, float] | None = None  # the presets any search published
    cut: Cut | None = None  # where the ranking was cut, and why


class _Searcher:
    def __init__(self, client: KgApiClient) -> None:
        self.client = client
        self.primary: SearchResponse | None = None
        self.default_seen: float | None = None
        self.presets_seen: dict[str, float] | None = None

    async def _page(self, request: SearchRequest) -> SearchResponse:
        response = await self.client.search(request)
        if request.min_similarity is None:
            self.default_seen = response.threshold_used
        if response.threshold_presets is not None:
            self.presets_seen = response.threshold_presets
        return response

    async def matches(self, level: Level, want: int, primary: bool = False
                      ) -> dict[str, ConceptHit]:
        """Up to ``want`` best matches of one term, merged over its ontologies."""
        found: dict[str, ConceptHit] = {}
        for ontology in level.ontologies or (None,):
            for hit in await self._scan(level, ontology, want, primary):
                best = found.get(hit.concept_id)
                if best is None or hit.score > best.score:
                    found[hit.concept_id] = hit
            primary = False
        return found

    async def _scan(self, level: Level, ontology: str | None, want: int, primary: bool
                    ) -> list[ConceptHit]:
        hits: list[ConceptHit] = []
        offset = 0
        while len(hits) < want and offset < MAX_SCAN:
            size = min(PAGE_SIZE_MAX, max(want - len(hits), 1))
            request = SearchRequest(level.text, limit=size, min_similarity=level.min_similarity,
                                    offset=offset, ontology=ontology)
            response = await self._page(request)
            if primary and offset == 0:
                self.primary = response
            # a score of 0 is no match, at any threshold (a server may list them at 0);
            # ranked best first, so nothing after one scores either
            scored = [h for h in response.results if h.score > 0]
            hits.extend(h for h in scored
                        if ontology is None or not h.ontologies or ontology in h.ontologies)
            offset += size
            if (len(scored) < len(response.results) or not response.results
                    or (ontology is None and len(response.results) < size)):
                break
        return hits[:want]


async def execute(client: KgApiClient, plan: QueryPlan) -> PlanOutcome:
    searcher = _Searcher(client)
    nested = len(plan.levels) > 1 or plan.union or plan.exclude
    depth = MAX_MATCHES if nested else plan.limit
    own = await searcher.matches(plan.own, max(depth, plan.limit), primary=True)

    ancestors: dict[int, dict[str, ConceptHit]] = {}
    extra: dict[str, dict[str, ConceptHit]] = {}
    excluded: dict[str, dict[str, ConceptHit]] = {}

    async def collect(level: Level, into: dict, slot: object) -> None:
        into[slot] = await searcher.matches(level, MAX_MATCHES)

    with errors.one_failure():  # a failed search fails the listing as one search would
        async with trio.open_nursery() as nursery:
            for index, level in enumerate(plan.levels[:-1]):
                nursery.start_soon(collect, level, ancestors, index)
            for term in plan.union:
                nursery.start_soon(collect, replace(plan.own, text=term), extra, term)
            for term in plan.exclude:
                nursery.start_soon(collect, replace(plan.own, text=term), excluded, term)

    counts = [LevelCount("level", level.text, len(ancestors[i]),
                         sum(1 for cid in own if cid not in ancestors[i]))
              for i, level in enumerate(plan.levels[:-1])]
    counts.append(LevelCount("level", plan.own.text, len(own)))
    combined: dict[str, ConceptHit] = {}
    for cid, hit in own.items():
        scores = [hit.score]
        for index in range(len(plan.levels) - 1):
            if cid not in ancestors[index]:
                break
            scores.append(ancestors[index][cid].score)
        else:
            combined[cid] = replace(hit, score=min(scores))
    for term in plan.union:
        added = 0
        for cid, hit in extra[term].items():
            added += cid not in combined
            if cid not in combined or hit.score > combined[cid].score:
                combined[cid] = hit
        counts.append(LevelCount("union", term, len(extra[term]), added))
    for term in plan.exclude:
        removed = sum(combined.pop(cid, None) is not None for cid in excluded[term])
        counts.append(LevelCount("exclude", term, len(excluded[term]), removed))
    ranked = sorted(combined.values(), key=lambda h: (-h.score, h.label, h.concept_id))
    cut = relevance_cut([hit.score for hit in ranked], plan.size, plan.limit)
    assert searcher.primary is not None
    return PlanOutcome(ranked[: cut.kept], searcher.primary, searcher.default_seen,
                       tuple(counts), searcher.presets_seen, cut)
