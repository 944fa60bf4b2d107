"""How a ``QueryPlan`` becomes a list of concepts, through the client's searches.

A concept is listed when it matches every level (AND); its combined score is the
*lowest* of its level scores, so a concept ranks as high as its weakest match. Union
terms then add their matches (at the query's own threshold, scored by that term),
exclude terms remove theirs (at the server default), and the list is cut where the
scores fall away from the best one, at the threshold's listing size, or at
``.meta/limit`` (``cut.py``).

A score of 0 is no match: such hits are dropped (the embedded server lists none, even
at threshold 0). Each term is fetched as deep as the plan needs (``QueryPlan.depth``);
paging: the search API returns at most 100 results a call, so larger wants page with
``offset``. A term whose ranking goes on past that depth has a count that is only a
floor (``LevelCount.more``: the status says "at least").

Scopes (an ontology directory, links): the contract's ``ontology`` filter is used only
where the server says it applied it by the concepts' sources (the embedded server
answers ``ontology_filter: "sources"``). The platform filters on a concept property its
own ingest never sets, after paging, and computes its hints without the filter: the
first scoped answer without that field teaches the client (``KgApiClient.scopes``) to
search unscoped and keep the results whose ``documents`` name the ontology, paging on
until it has its want or has scanned ``MAX_SCAN`` results. The unscoped answer's hints
are kept only where they are in the scope (``_in_scope``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import PAGE_SIZE_MAX, KgApiClient, SearchRequest
from kg_fuse.client.models import ConceptHit, SearchResponse
from kg_fuse.listing.cut import Cut, relevance_cut
from kg_fuse.listing.plan import Level, QueryPlan

log = logging.getLogger(__name__)

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
    scope: tuple[str, ...] = ()  # the ontologies the term was searched in (all: empty)
    outside: int = 0  # matches at its threshold outside the scope (as far as scanned)
    more: bool = False  # its ranking goes on past the depth fetched: ``matches`` a floor


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
        self.outside: dict[Level, int] = {}  # per scoped level: matches outside its scope
        self.more: set[Level] = set()  # levels whose ranking goes on past the depth fetched

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
        if level.ontologies and not found and self.client.scopes:
            self.outside[level] = await self._outside(level)
        return found

    async def _scoped_page(self, request: SearchRequest) -> tuple[SearchResponse, bool]:
        """One page of a scoped term, and whether the server applied the scope: asked
        of the server until it answers without ``ontology_filter`` (then never again)."""
        if self.client.scopes is not False:
            response = await self._page(request)
            if response.ontology_filter:
                self.client.scopes = True
                return response, True
            log.info("the server did not say it filtered by %r's sources: scoped "
                     "searches are filtered here from now on", request.ontology)
            self.client.scopes = False
        return await self._page(replace(request, ontology=None)), False

    async def _scan(self, level: Level, ontology: str | None, want: int, primary: bool
                    ) -> list[ConceptHit]:
        hits: list[ConceptHit] = []
        outside = 0
        offset = 0
        ended = False
        while len(hits) < want and offset < MAX_SCAN:
            size = min(PAGE_SIZE_MAX, max(want - len(hits), 1))
            request = SearchRequest(level.text, limit=size, min_similarity=level.min_similarity,
                                    offset=offset, ontology=ontology)
            if ontology is None:
                response, by_server = await self._page(request), True
            else:
                response, by_server = await self._scoped_page(request)
            if primary and offset == 0:
                self.primary = response if by_server else _in_scope(response, ontology)
            scored = _scored(response)
            kept = scored if by_server else [h for h in scored if _belongs(h, ontology)]
            outside += sum(1 for h in scored if not by_server
                           and not any(_belongs(h, o) for o in level.ontologies))
            hits.extend(kept)
            offset += size
            if len(scored) < size:  # the ranking ended (or a score of 0 did)
                ended = True
                break
        if not ended:
            self.more.add(level)
        if outside:  # each of a level's ontologies scans the same ranking
            self.outside[level] = max(self.outside.get(level, 0), outside)
        return hits[:want]

    async def _outside(self, level: Level) -> int:
        """How many matches a term that the server scoped, with nothing in its scope,
        has outside it (one unscoped page): the status never blames the threshold for
        what the scope removed."""
        response = await self._page(SearchRequest(level.text, limit=PAGE_SIZE_MAX,
                                                  min_similarity=level.min_similarity))
        return sum(1 for hit in _scored(response)
                   if not any(_belongs(hit, o) for o in level.ontologies))


def _scored(response: SearchResponse) -> list[ConceptHit]:
    """A page's hits that count: a score of 0 is no match, at any threshold (a server
    may list them at 0); ranked best first, so nothing after one scores either."""
    return [h for h in response.results if h.score > 0]


def _belongs(hit: ConceptHit, ontology: str | None) -> bool:
    return ontology is None or ontology in hit.ontologies


def _in_scope(response: SearchResponse, ontology: str) -> SearchResponse:
    """An unscoped answer's hints as far as they hold in the scope: its best near miss
    when it is in the ontology; the rest (near misses by label, the suggestion and the
    count below the threshold, all computed over every ontology) dropped."""
    top = response.top_match
    return replace(response, near_misses=(), near_miss_threshold=None,
                   suggested_threshold=None, below_threshold_count=None,
                   top_match=top if top is not None and _belongs(top, ontology) else None)


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
        into[slot] = await searcher.matches(level, plan.depth)

    with errors.one_failure():  # a failed search fails the listing as one search would
        async with trio.open_nursery() as nursery:
            for index, level in enumerate(plan.levels[:-1]):
                nursery.start_soon(collect, level, terms.ancestors, index)
            for term in plan.union:
                nursery.start_soon(collect, _union_level(plan, term), terms.union, term)
            for term in plan.exclude:
                nursery.start_soon(collect, _exclude_level(plan, term), terms.exclude, term)
    return terms


def _union_level(plan: QueryPlan, term: str) -> Level:
    return replace(plan.own, text=term)


def _exclude_level(plan: QueryPlan, term: str) -> Level:
    return replace(plan.own, text=term, min_similarity=None)  # the default (plan.py)


def _intersect(plan: QueryPlan, own: Matches, ancestors: dict[int, Matches],
               searcher: _Searcher) -> tuple[Matches, list[LevelCount]]:
    """The query's own matches that match every enclosing level, each scored by its
    weakest level; and each level's count."""
    enclosing = plan.levels[:-1]
    outside, more = searcher.outside, searcher.more
    counts = [LevelCount("level", level.text, len(ancestors[i]),
                         sum(1 for cid in own if cid not in ancestors[i]),
                         level.ontologies, outside.get(level, 0), level in more)
              for i, level in enumerate(enclosing)]
    counts.append(LevelCount("level", plan.own.text, len(own), 0, plan.own.ontologies,
                             outside.get(plan.own, 0), plan.own in more))
    combined: Matches = {}
    for cid, hit in own.items():
        if all(cid in ancestors[i] for i in range(len(enclosing))):
            scores = [hit.score, *(ancestors[i][cid].score for i in range(len(enclosing)))]
            combined[cid] = replace(hit, score=min(scores))
    return combined, counts


def _add_union(combined: Matches, term: str, matches: Matches, more: bool) -> LevelCount:
    added = 0
    for cid, hit in matches.items():
        added += cid not in combined
        if cid not in combined or hit.score > combined[cid].score:
            combined[cid] = hit
    return LevelCount("union", term, len(matches), added, more=more)


def _remove_excluded(combined: Matches, term: str, matches: Matches, more: bool
                     ) -> LevelCount:
    removed = sum(combined.pop(cid, None) is not None for cid in matches)
    return LevelCount("exclude", term, len(matches), removed, more=more)


def _reaches(ranked: Sequence[ConceptHit], own: Matches, union: dict[str, Matches]
             ) -> list[float]:
    """Each ranked result's reach: its best score among the terms searched at the query's
    own threshold (its own term, the union terms), which the cut measures (``cut.py``)."""
    def reach(cid: str) -> float:
        return max(m[cid].score for m in (own, *union.values()) if cid in m)
    return [reach(hit.concept_id) for hit in ranked]


async def execute(client: KgApiClient, plan: QueryPlan) -> PlanOutcome:
    """Search every level and term of ``plan``, combine the matches, and cut the
    ranking."""
    searcher = _Searcher(client)
    own = await searcher.matches(plan.own, plan.depth, primary=True)
    terms = await _other_terms(searcher, plan)
    combined, counts = _intersect(plan, own, terms.ancestors, searcher)
    counts += [_add_union(combined, term, terms.union[term],
                          _union_level(plan, term) in searcher.more) for term in plan.union]
    counts += [_remove_excluded(combined, term, terms.exclude[term],
                                _exclude_level(plan, term) in searcher.more)
               for term in plan.exclude]
    ranked = sorted(combined.values(), key=lambda h: (-h.score, h.label, h.concept_id))
    reaches = _reaches(ranked, own, terms.union)
    cut = relevance_cut(reaches, plan.size, plan.limit)
    assert searcher.primary is not None
    return PlanOutcome([ranked[i] for i in cut.listed(reaches)], searcher.primary,
                       searcher.default_seen, tuple(counts), searcher.presets_seen, cut)
