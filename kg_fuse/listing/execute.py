"""How a ``QueryPlan`` becomes a list of concepts, through the client's searches.

A concept is listed when it matches every level (AND); its combined score is the
*lowest* of its level scores, so a concept ranks as high as its weakest match. Union
terms then add their matches (at the query's own threshold, scored by that term),
exclude terms remove theirs, and the list is cut at the query's limit, or earlier where
the scores fall away from the best one (``cut.py``: inheriting and preset thresholds
only; an explicit threshold lists everything above it).

A score of 0 is no match: such hits are dropped (the embedded server lists none, even
at threshold 0). Paging: the search API returns at most 100 results a call, so larger
wants page with ``offset``. A scoped page can come back short on the platform (it
filters after paging), so scoped paging only stops at an empty page, the want, or a scan
cap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import PAGE_SIZE_MAX, KgApiClient, SearchRequest
from kg_fuse.client.models import ConceptHit, SearchResponse
from kg_fuse.listing.cut import Cut, relevance_cut
from kg_fuse.listing.plan import Level, QueryPlan

log = logging.getLogger(__name__)

MAX_MATCHES = 1000  # the most matches fetched for one term (intersections need depth)
MAX_SCAN = 2000  # how far scoped paging may go looking past short pages

Matches = dict[str, ConceptHit]  # by concept id


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

    async def matches(self, level: Level, want: int, primary: bool = False) -> Matches:
        """Up to ``want`` best matches of one term, merged over its ontologies."""
        found: Matches = {}
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
            scored, last = _page_hits(response, ontology, size)
            hits.extend(scored)
            offset += size
            if last:
                break
        return hits[:want]


def _page_hits(response: SearchResponse, ontology: str | None, size: int
               ) -> tuple[list[ConceptHit], bool]:
    """One page's hits that count (scored, in ``ontology``), and whether it is the last
    page worth asking for."""
    # a score of 0 is no match, at any threshold (a server may list them at 0); ranked
    # best first, so nothing after one scores either
    scored = [h for h in response.results if h.score > 0]
    kept = [h for h in scored
            if ontology is None or not h.ontologies or ontology in h.ontologies]
    last = (len(scored) < len(response.results) or not response.results
            or (ontology is None and len(response.results) < size))
    return kept, last


@dataclass
class _Terms:
    """The matches of every term but the query's own: its enclosing levels (by position),
    its union and its exclude terms."""

    ancestors: dict[int, Matches] = field(default_factory=dict)
    union: dict[str, Matches] = field(default_factory=dict)
    exclude: dict[str, Matches] = field(default_factory=dict)


async def _other_terms(searcher: _Searcher, plan: QueryPlan) -> _Terms:
    """The enclosing levels' and the union and exclude terms' matches, side by side."""
    terms = _Terms()

    async def collect(level: Level, into: dict, slot: object) -> None:
        into[slot] = await searcher.matches(level, MAX_MATCHES)

    with errors.one_failure():  # a failed search fails the listing as one search would
        async with trio.open_nursery() as nursery:
            for index, level in enumerate(plan.levels[:-1]):
                nursery.start_soon(collect, level, terms.ancestors, index)
            for term in plan.union:
                nursery.start_soon(collect, replace(plan.own, text=term), terms.union, term)
            for term in plan.exclude:
                nursery.start_soon(collect, replace(plan.own, text=term), terms.exclude,
                                   term)
    return terms


def _intersect(plan: QueryPlan, own: Matches, ancestors: dict[int, Matches]
               ) -> tuple[Matches, list[LevelCount]]:
    """The query's own matches that match every enclosing level, each scored by its
    weakest level; and each level's count."""
    enclosing = plan.levels[:-1]
    counts = [LevelCount("level", level.text, len(ancestors[i]),
                         sum(1 for cid in own if cid not in ancestors[i]))
              for i, level in enumerate(enclosing)]
    counts.append(LevelCount("level", plan.own.text, len(own)))
    combined: Matches = {}
    for cid, hit in own.items():
        if all(cid in ancestors[i] for i in range(len(enclosing))):
            scores = [hit.score, *(ancestors[i][cid].score for i in range(len(enclosing)))]
            combined[cid] = replace(hit, score=min(scores))
    return combined, counts


def _add_union(combined: Matches, term: str, matches: Matches) -> LevelCount:
    added = 0
    for cid, hit in matches.items():
        added += cid not in combined
        if cid not in combined or hit.score > combined[cid].score:
            combined[cid] = hit
    return LevelCount("union", term, len(matches), added)


def _remove_excluded(combined: Matches, term: str, matches: Matches) -> LevelCount:
    removed = sum(combined.pop(cid, None) is not None for cid in matches)
    return LevelCount("exclude", term, len(matches), removed)


async def execute(client: KgApiClient, plan: QueryPlan) -> PlanOutcome:
    """Search every level and term of ``plan``, combine the matches, and cut the
    ranking."""
    searcher = _Searcher(client)
    nested = len(plan.levels) > 1 or plan.union or plan.exclude
    depth = MAX_MATCHES if nested else plan.limit
    own = await searcher.matches(plan.own, max(depth, plan.limit), primary=True)
    terms = await _other_terms(searcher, plan)
    combined, counts = _intersect(plan, own, terms.ancestors)
    counts += [_add_union(combined, term, terms.union[term]) for term in plan.union]
    counts += [_remove_excluded(combined, term, terms.exclude[term]) for term in plan.exclude]
    ranked = sorted(combined.values(), key=lambda h: (-h.score, h.label, h.concept_id))
    cut = relevance_cut([hit.score for hit in ranked], plan.size, plan.limit)
    assert searcher.primary is not None
    return PlanOutcome(ranked[: cut.kept], searcher.primary, searcher.default_seen,
                       tuple(counts), searcher.presets_seen, cut)
