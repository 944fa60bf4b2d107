"""Everything the mount holds about one saved query, in one object, dropped in one place.

A ``QueryState`` is made on first use of a query and holds what the mount knows about it
beyond its saved settings: the current listing, the names and mtimes its result files
keep across refreshes, the single-flight lock and the last failed fetch, the error
``.meta/status`` shows, the mtimes of its directory and control files, and editors'
scratch files in its ``.meta``.

``QueryStates.drop`` is the only way anything leaves, for one of three reasons:

- ``REMOVED`` (``rmdir``): the whole state goes;
- ``FORGOTTEN`` (the kernel forgot the query's directory, so it holds nothing below it:
  a child's dentry pins its parent): the listing (its rendered bodies, the bulk) and the
  negative cache go; the next ``ls`` fetches again, and its files keep their names and
  mtimes (kept: a few hundred bytes a result), as do scratch files and settings' mtimes;
- ``BUDGET`` (the listings' LRU byte budget, ``SETS_BUDGET``): only the listing goes.

Freed heap pages are handed back to the system (``give_memory_back``) at once after a
large drop, and by the poller after smaller ones.
"""

from __future__ import annotations

import enum
import gc
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from cachetools import LRUCache

from kg_fuse.client.models import SearchResponse
from kg_fuse.fs.kernel.names import NameRegistry
from kg_fuse.fs.kernel.nodes import NodeKind
from kg_fuse.fs.queries.why import Summary
from kg_fuse.listing.cut import Cut
from kg_fuse.listing.execute import LevelCount
from kg_fuse.listing.plan import QueryPlan
from kg_fuse.memory import give_memory_back
from kg_fuse.retry import Backoff

if TYPE_CHECKING:
    from kg_fuse.client import errors

log = logging.getLogger(__name__)

SETS_BUDGET = 32 * 2**20  # bytes of rendered listings kept (about 25k result files)
TRIM_AFTER_BYTES = 4 * 2**20  # bytes dropped between two heap trims
RESULT_OVERHEAD = 200  # bytes a result's name and mtime records take (kept while in use)


class Drop(enum.Enum):
    REMOVED = "removed"
    FORGOTTEN = "forgotten by the kernel"
    BUDGET = "byte budget"


@dataclass(frozen=True, slots=True)
class ResultFile:
    name: str
    concept_id: str
    score: float
    body: bytes
    mtime_ns: int
    why: bytes = b""  # why it is listed (``user.kg.why``; also in ``body``)


@dataclass
class ResultSet:
    """One fetched listing of a query: files in rank order, plus the server's hints."""

    plan: QueryPlan
    response: SearchResponse
    fetched_at: float
    fetched_wall: float
    files: dict[str, ResultFile] = field(default_factory=dict)
    by_concept: dict[str, ResultFile] = field(default_factory=dict)
    stale: bool = False
    levels: tuple[LevelCount, ...] = ()  # how each level and term shaped the listing
    cut: Cut | None = None  # where the ranking was cut, and why
    why: Summary | None = None  # why its results are listed, summed up

    def add(self, result: ResultFile) -> None:
        self.files[result.name] = result
        self.by_concept[result.concept_id] = result
        self.nbytes += len(result.body) + len(result.why) + 2 * len(result.name) + 200

    nbytes: int = 0



@dataclass(frozen=True)
class Failure:
    """The last failed fetch: callers queued behind it get it without waiting."""

    at: float
    plan: QueryPlan
    error: errors.KgError


@dataclass(eq=False)
class QueryState:
    key: str
    listing: ResultSet | None = None
    names: NameRegistry = field(default_factory=NameRegistry)
    # concept id -> digest of its body (8 bytes) + its mtime (8 bytes), packed: a result
    # keeps its mtime while its content is unchanged, even if it left the listing
    # meanwhile (kept after the kernel forgot the query: one small object a result)
    mtimes: dict[str, bytes] = field(default_factory=dict)
    lock: trio.Lock = field(default_factory=trio.Lock)
    failure: Failure | None = None
    retries: Backoff | None = None  # after a failed fetch: when the next may go
    fetch_error: str | None = None  # why the last fetch for .meta/status failed
    # when the directory (None) and each writable control file (its kind) last changed
    meta_mtimes: dict[NodeKind | None, int] = field(default_factory=dict)
    scratch: dict[str, bytearray] = field(default_factory=dict)

    def mtime_for(self, concept_id: str, body: bytes, now_ns: int) -> int:
        """The result's mtime: the one it had while its bytes were the same, else now."""
        digest = hashlib.blake2b(body, digest_size=8).digest()
        seen = self.mtimes.get(concept_id)
        if seen is not None and seen[:8] == digest:
            return int.from_bytes(seen[8:], "big")
        self.mtimes[concept_id] = digest + now_ns.to_bytes(8, "big")
        return now_ns

    def forget_fetched(self) -> None:
        """Drop what the next listing fetches again."""
        self.listing = None
        self.failure = None
        self.retries = None
        self.fetch_error = None


# Listings that are no longer current or kept, by query key: whoever caused it tells the
# invalidation, which has the kernel forget their names.
Dropped = Sequence[tuple[str, "ResultSet"]]


class _Budget(LRUCache):
    """Listings by query key, the least recently used dropped past the byte budget."""

    def __init__(self, budget: int, on_evict: Callable[[str], None]) -> None:
        super().__init__(maxsize=budget, getsizeof=lambda rs: max(rs.nbytes, 1))
        self._on_evict = on_evict

    def popitem(self) -> tuple[str, ResultSet]:
        key, value = super().popitem()
        self._on_evict(key)
        return key, value


class QueryStates:
    """The states of all queries in use, and the one place they are dropped."""

    def __init__(self, budget: int = SETS_BUDGET) -> None:
        self._states: dict[str, QueryState] = {}
        self._budget = _Budget(budget, self._over_budget)
        self._evicted: list[tuple[str, ResultSet]] = []  # by the budget, in ``store``
        self._dropped_bytes = 0

    def __len__(self) -> int:
        return len(self._states)

    def __iter__(self) -> Iterator[QueryState]:
        return iter(list(self._states.values()))

    def get(self, key: str) -> QueryState:
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = QueryState(key)
        return state

    def find(self, key: str) -> QueryState | None:
        return self._states.get(key)

    def listing(self, key: str) -> ResultSet | None:
        state = self._states.get(key)
        if state is None or state.listing is None:
            return None
        self._budget.get(key)  # a use: most recently used
        return state.listing

    def held(self) -> list[tuple[str, ResultSet]]:
        """The listings held now, by query key."""
        return [(key, state.listing) for key, state in list(self._states.items())
                if state.listing is not None]

    def expire(self, keys: Iterable[str]) -> Dropped:
        """The next fetch of each listing goes to the server (the listing stays, as a
        stale fallback). Returns the listings expired now (the kernel must forget their
        names)."""
        expired: list[tuple[str, ResultSet]] = []
        for key in keys:
            state = self._states.get(key)
            listing = state.listing if state is not None else None
            if listing is None or listing.fetched_at == float("-inf"):
                continue
            listing.fetched_at = float("-inf")
            expired.append((key, listing))
        return expired

    def server_back(self) -> None:
        """The server answered again: failed listings may be fetched at once."""
        for state in self._states.values():
            state.failure = state.retries = None

    def store(self, state: QueryState, listing: ResultSet) -> Dropped:
        """Hold the listing; returns those the byte budget dropped to make room (never
        this one: it is the newest)."""
        state.listing = listing
        self._budget[state.key] = listing
        evicted, self._evicted = self._evicted, []
        return evicted

    @property
    def nbytes(self) -> int:
        return int(self._budget.currsize)

    def _over_budget(self, key: str) -> None:
        self._evicted.extend(self.drop(key, Drop.BUDGET, from_budget=True))

    def drop(self, key: str, why: Drop, from_budget: bool = False) -> Dropped:
        """The one eviction (see the module's docstring for what each reason drops).
        Returns the listing dropped, if the kernel must forget its names (after
        ``FORGOTTEN`` it holds none of them)."""
        state = self._states.get(key)
        if state is None:
            return []
        listing = state.listing
        if not from_budget:
            self._budget.pop(key, None)
        if why is Drop.BUDGET:
            state.listing = None
        elif why is Drop.FORGOTTEN:
            state.forget_fetched()
        else:
            del self._states[key]
            self.dropped(RESULT_OVERHEAD * len(state.mtimes))  # its names and mtimes
        if listing is None:
            return []
        log.debug("listing of %r dropped (%s)", key, why.value)
        self.dropped(listing.nbytes)
        return [] if why is Drop.FORGOTTEN else [(key, listing)]

    def dropped(self, nbytes: int) -> None:
        """``nbytes`` were freed (here or in a cache beside the states): trim past a few MiB."""
        self._dropped_bytes += nbytes
        if self._dropped_bytes >= TRIM_AFTER_BYTES:
            self.trim()

    def trim(self) -> None:
        """Hand the heap pages freed by drops since the last trim back to the system
        (glibc keeps them otherwise): at once after a large drop, and from the poller
        for the rest."""
        if self._dropped_bytes:
            self._dropped_bytes = 0
            gc.collect()  # e.g. a stored failure's traceback holds frames in a cycle
            give_memory_back()
