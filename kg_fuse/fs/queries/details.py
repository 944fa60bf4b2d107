"""Concept details (``GET /query/concept/{id}``), fetched in parallel and kept in an LRU.

A listing renders each result with its concept's details. They are kept between
listings within ``DETAILS_BUDGET`` bytes (least recently used dropped first), expire
after ``max_age``, and are emptied once no listing is held or the server's content
changed. Details are fetched over a bounded pool of kept-alive connections; the batch's
deadline scales with its size, and a stalled server ends it at the first request
timeout (files then render without details).
"""

from __future__ import annotations

import logging
import math

import trio
from cachetools import LRUCache

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.models import ConceptDetail

log = logging.getLogger(__name__)

DETAIL_CONCURRENCY = 8  # concept details in flight at once (the client's pool is larger)
DETAILS_BUDGET = 8 * 2**20  # bytes of concept details kept between listings


def _detail_size(item: tuple[float, ConceptDetail]) -> int:
    detail = item[1]
    return 300 + len(detail.description) + len(detail.signature) + sum(
        200 + len(e.quote) + len(e.full_text) + len(e.filename or "") + len(e.document)
        for e in detail.evidence) + sum(
        150 + len(r.to_label) + len(r.to_id) for r in detail.relationships)


class ConceptDetails:
    """The details cache and its fetcher."""

    def __init__(self, client: KgApiClient, max_age: float) -> None:
        self._client = client
        self.max_age = max_age
        self._details: LRUCache = LRUCache(DETAILS_BUDGET, getsizeof=_detail_size)

    @property
    def nbytes(self) -> int:
        return int(self._details.currsize)

    def clear(self) -> None:
        self._details.clear()

    def drop_unused(self, listings_held: bool, expired_too: bool = False) -> int:
        """Drop the details no listing will use: all of them once no listing is held
        (the queries were removed or forgotten), and with ``expired_too`` those older
        than ``max_age`` (a listing refetches them anyway). Returns the bytes."""
        before = self.nbytes
        if not listings_held:
            self._details.clear()
        elif expired_too:
            now = trio.current_time()
            for cid in [c for c, (at, _) in self._details.items() if now - at >= self.max_age]:
                del self._details[cid]
        return before - self.nbytes

    async def fetch(self, concept_ids: list[str]) -> dict[str, ConceptDetail]:
        """The details of these concepts that could be had (cached or fetched)."""
        found: dict[str, ConceptDetail] = {}
        now = trio.current_time()
        missing = []
        for cid in concept_ids:
            cached = self._details.get(cid)
            if cached is not None and now - cached[0] < self.max_age:
                found[cid] = cached[1]
            else:
                missing.append(cid)
        if not missing:
            return found
        limiter = trio.CapacityLimiter(DETAIL_CONCURRENCY)
        stalled = False

        async def fetch_one(cid: str, scope: trio.CancelScope) -> None:
            nonlocal stalled
            async with limiter:
                try:
                    detail = await self._client.concept(cid)
                except errors.ServerTimeout as exc:  # stalled: stop the batch now
                    log.info("no details for concept %s: %s", cid, exc)
                    stalled = True
                    scope.cancel()
                    return
                except errors.KgError as exc:
                    log.info("no details for concept %s: %s", cid, exc)
                    return
            self._details[cid] = (trio.current_time(), detail)
            found[cid] = detail

        # The deadline scales with the work (one request timeout per round of
        # DETAIL_CONCURRENCY requests), so a busy but healthy server completes a
        # 1000-result listing; a stalled one ends the batch at its first timeout.
        rounds = math.ceil(len(missing) / DETAIL_CONCURRENCY)
        with trio.move_on_after(self._client.timeout * rounds) as scope:
            async with trio.open_nursery() as nursery:
                for cid in missing:
                    nursery.start_soon(fetch_one, cid, nursery.cancel_scope)
        if scope.cancelled_caught or stalled:
            fetched = len(found) - (len(concept_ids) - len(missing))
            log.warning("concept details timed out; %d of %d rendered without them",
                        len(missing) - fetched, len(concept_ids))
        return found
