"""Running a query set against a live server, the way the mount would ask.

Each query is searched twice:

* a *probe* with ``min_similarity=0`` (everything scored), paged until an expected
  concept turns up or :data:`RANK_DEPTH` results were seen: its best score and rank;
* the *listing* the mount would show: ``min_similarity`` omitted (the server default
  applies), the mount's default listing limit, and the plan and cut the mount lists with
  (:mod:`kg_fuse.listing`), so the listing stops where the mount's relevance cut stops it
  (``--no-cut``: everything above the default, as an explicit threshold lists).

The figures are therefore what a user of ``mkdir "<query>"`` would see, whatever the
server does inside (vector, keyword or fused scoring).
"""

from __future__ import annotations

from dataclasses import dataclass

import trio

from kg_fuse.client import KgApiClient, SearchRequest, errors
from kg_fuse.client.api import PAGE_SIZE_MAX
from kg_fuse.client.models import ConceptHit
from kg_fuse.eval.sets import QuerySet, RelevantQuery
from kg_fuse.limits import DEFAULT_LIMIT
from kg_fuse.listing.execute import execute
from kg_fuse.listing.plan import inheriting_plan

RANK_DEPTH = 200
CONCURRENCY = 2
REQUEST_TIMEOUT = 60.0


@dataclass
class GibberishResult:
    text: str
    best_score: float  # the top score at min_similarity=0
    best_label: str
    listed: int  # how many concepts the default listing shows
    threshold_used: float


@dataclass
class RelevantResult:
    text: str
    expect: tuple[str, ...]
    best_score: float | None  # the best expected concept's score (None: not within depth)
    best_label: str | None
    rank: int | None  # 1-based rank of the best expected concept among all results
    top_score: float
    top_label: str
    listed: int
    listed_rank: int | None  # its rank in the default listing, None when not listed
    threshold_used: float
    listed_labels: tuple[str, ...] = ()  # the default listing, in rank order
    judged_relevant: tuple[str, ...] = ()  # the set's judgments, when it has them
    judged_irrelevant: tuple[str, ...] = ()

    @property
    def hit(self) -> bool:
        return self.listed_rank is not None


@dataclass
class EvalRun:
    qset: QuerySet
    api_url: str
    listing_limit: int
    gibberish: list[GibberishResult]
    relevant: list[RelevantResult]
    cut: bool = True  # whether listings stop where the mount's relevance cut does


class Evaluator:
    """Runs one set's queries through an API client, a few at a time."""

    def __init__(self, client: KgApiClient, qset: QuerySet,
                 listing_limit: int = DEFAULT_LIMIT, depth: int = RANK_DEPTH,
                 cut: bool = True) -> None:
        self.client = client
        self.qset = qset
        self.listing_limit = listing_limit
        self.depth = depth
        self.cut = cut

    async def _search(self, text: str, limit: int, min_similarity: float | None,
                      offset: int = 0):
        request = SearchRequest(text, limit=limit, min_similarity=min_similarity,
                                offset=offset, ontology=self.qset.ontology)
        return await self.client.search(request, timeout=REQUEST_TIMEOUT)

    async def _listing(self, text: str) -> tuple[list[ConceptHit], float]:
        """What an inheriting query directory lists, and the threshold it used."""
        ontologies = (self.qset.ontology,) if self.qset.ontology else ()
        plan = inheriting_plan(text, ontologies, self.listing_limit, self.cut)
        outcome = await execute(self.client, plan)
        return outcome.hits, outcome.primary.threshold_used

    async def gibberish_one(self, text: str) -> GibberishResult:
        probe = await self._search(text, 1, 0.0)
        listing, used = await self._listing(text)
        top = probe.results[0] if probe.results else None
        return GibberishResult(text, top.score if top else 0.0, top.label if top else "",
                               len(listing), used)

    async def _probe(self, text: str, wanted: set[str]
                     ) -> tuple[tuple[int, ConceptHit] | None, ConceptHit | None]:
        """Everything scored, paged until a ``wanted`` label turns up or ``depth``
        results were seen: the first wanted hit with its 1-based rank (None: not within
        the depth), and the top hit (None: nothing scored)."""
        best = None
        top = None
        seen = 0
        while seen < self.depth:
            page = await self._search(text, min(PAGE_SIZE_MAX, self.depth - seen),
                                      0.0, offset=seen)
            top = top or (page.results[0] if page.results else None)
            best = next(((seen + i + 1, hit) for i, hit in enumerate(page.results)
                         if hit.label in wanted), None)
            seen += len(page.results)
            if best or len(page.results) < PAGE_SIZE_MAX:
                break
        return best, top

    async def relevant_one(self, query: RelevantQuery) -> RelevantResult:
        wanted = set(query.expect)
        best, top = await self._probe(query.text, wanted)
        listing, used = await self._listing(query.text)
        listed_rank = next((i + 1 for i, hit in enumerate(listing)
                            if hit.label in wanted), None)
        return RelevantResult(
            text=query.text, expect=query.expect,
            best_score=best[1].score if best else None,
            best_label=best[1].label if best else None,
            rank=best[0] if best else None,
            top_score=top.score if top else 0.0, top_label=top.label if top else "",
            listed=len(listing), listed_rank=listed_rank, threshold_used=used,
            listed_labels=tuple(hit.label for hit in listing),
            judged_relevant=query.relevant, judged_irrelevant=query.irrelevant,
        )

    async def run(self) -> EvalRun:
        gibberish: list[GibberishResult | None] = [None] * len(self.qset.gibberish)
        relevant: list[RelevantResult | None] = [None] * len(self.qset.relevant)
        limiter = trio.CapacityLimiter(CONCURRENCY)

        async def gib(i: int, text: str) -> None:
            async with limiter:
                gibberish[i] = await self.gibberish_one(text)

        async def rel(i: int, query: RelevantQuery) -> None:
            async with limiter:
                relevant[i] = await self.relevant_one(query)

        with errors.one_failure():
            async with trio.open_nursery() as nursery:
                for i, text in enumerate(self.qset.gibberish):
                    nursery.start_soon(gib, i, text)
                for i, query in enumerate(self.qset.relevant):
                    nursery.start_soon(rel, i, query)
        return EvalRun(self.qset, self.client.api_url, self.listing_limit,
                       [g for g in gibberish if g is not None],
                       [r for r in relevant if r is not None], self.cut)
