"""Watching the server: its content epoch, and its default threshold as last learned.

The client never hard-codes a default. It learns it, cheapest first:

1. from the epoch response, which the poller fetches every ``--poll-interval`` anyway and
   which the embedded server extends with the default and its presets (any user);
2. from ``threshold_used`` of every search that omitted ``min_similarity`` (the listings'
   own searches: free);
3. from the admin endpoint, when the server's epoch does not carry the default (the
   platform) and the client may read it (a cheap GET, every ``--poll-interval``);
4. from a one-result probe search with the optional enrichments off: every
   ``--poll-interval`` for a client the admin endpoint refuses (an ordinary user of the
   platform: 403), while the mount holds a listing; otherwise when someone needs the value
   (``.meta/threshold``, a creation probe) and the last one is older than ``ttl``
   (``--max-age``). An idle mount never searches.

So a PUT of a new default shows within ``--poll-interval`` for every client: on the
embedded server by the epoch, on the platform by the admin endpoint or, for an ordinary
user, by the probe (about 0.2 s of the platform's time a poll, measured; an epoch GET
takes 0.012 s).

Every value learned, whatever its source, goes through ``observe``. The watcher acts on
nothing it learns: it returns what changed (``observe``, ``refresh_default``, and a
``Polled`` from ``poll`` and ``look``) and its caller, the query service, hands that to
the invalidation, which decides what it drops.

Besides the poll, reading ``.meta/status`` looks at the server at once (``look``), so a
stopped server shows on that read, not up to ``--poll-interval`` later.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import trio

from kg_fuse.client import errors
from kg_fuse.client.api import Epoch, KgApiClient, SearchRequest
from kg_fuse.listing.explain import DefaultOrigin
from kg_fuse.retry import Backoff

log = logging.getLogger(__name__)

# An inheriting search of this text reports the default to any client (ADR-508).
PROBE_TEXT = "kg-fuse server default probe"
FROM_EPOCH = "the epoch poll"
FROM_ADMIN = "the admin endpoint"
FROM_SEARCH = "an inheriting search"
FROM_PROBE = "a probe search"
FROM_SAVED = "saved by an earlier mount"


@dataclass(frozen=True)
class Polled:
    """What one look at the server learned."""

    content: bool = False  # the epoch moved
    default: bool = False  # the default or its presets changed
    back: bool = False  # the server answered again after failing


class ServerWatcher:
    """The server's epoch and default as this mount knows them (inside a trio run)."""

    def __init__(self, client: KgApiClient, ttl: float, probe_timeout: float = 2.0,
                 initial: float | None = None,
                 presets: dict[str, float] | None = None) -> None:
        self._client = client
        self.ttl = ttl
        self.probe_timeout = probe_timeout
        self.value = initial
        # The preset values the server publishes with its default (None: not learned,
        # or a server that does not publish them: the fixed offsets apply).
        self.presets = presets
        self.server_error: str | None = None  # why the last poll failed
        self.server_id: str | None = None  # the identity it reported (None: it reports none)
        self._epoch: int | None = None
        self._how: str | None = FROM_SAVED if initial is not None else None
        self._learned_wall: float | None = None
        self._learned_at: float | None = None
        # after a failed lookup the server is asked again under the retry policy
        self._retries = Backoff()
        self._admin_readable: bool | None = None
        self._lock = trio.Lock()
        self._polling: trio.Event | None = None  # set when the poll under way ends
        self._stalled = False  # the last poll timed out (not refused: that costs nothing)
        self._failed_at = float("-inf")  # when the last poll failed (trio clock)

    @property
    def answering(self) -> bool:
        """Whether the last look at the server got an answer."""
        return self._epoch is not None and self.server_error is None

    @property
    def fresh(self) -> bool:
        return self._learned_at is not None and trio.current_time() - self._learned_at < self.ttl

    @property
    def origin(self) -> DefaultOrigin:
        """The value, how and when the server first reported it (for ``.meta/status``):
        seeing the same value again changes neither, so the files that show it change
        only when the default does."""
        return DefaultOrigin(self.value, self._how, self._learned_wall, self.presets)

    # -- the one way in for a learned default --------------------------------------------

    def observe(self, value: float | None, presets: dict[str, float] | None = None,
                how: str = FROM_SEARCH) -> bool:
        """Record a value the server just reported (by default an inheriting search's
        ``threshold_used``) and the presets it published with it. Presets come with
        every search, also one with its own threshold: ``value`` None records them
        alone. Returns whether the default or its presets changed."""
        previous, previous_presets = self.value, self.presets
        if value is None and presets is not None and "standard" in presets:
            value = presets["standard"]  # the server publishes its default with them
        if value is None:
            if presets is None or self.value is None:
                return False
            self.presets = presets
        else:
            self._learned(value, presets, how)
        return self._changed(previous, previous_presets)

    def _changed(self, previous: float | None, previous_presets: dict[str, float] | None
                 ) -> bool:
        """Whether the default or its presets changed from these (said in the log)."""
        if self.value is None or (previous == self.value
                                  and self.presets == previous_presets):
            return False
        log.info("server default threshold is %s (was %s), presets %s", self.value,
                 previous, self.presets or "not published")
        return True

    def _learned(self, value: float, presets: dict[str, float] | None, how: str) -> None:
        """A default the server reported: fresh now, whatever the value; its origin
        recorded when it is new (or was only saved by an earlier mount)."""
        previous = self.value
        self.value = value
        if presets is not None or previous != value:  # a new default: its presets
            self.presets = presets
        if previous != value or self._learned_wall is None:  # new, or only saved
            self._how, self._learned_wall = how, time.time()
        self._learned_at = trio.current_time()  # fresh, whatever the value

    # -- asking the server -----------------------------------------------------------------

    async def refresh_default(self) -> bool:
        """Refresh the default (``value``) if older than ``ttl``; the last known value
        stays if the server cannot be reached. After a failure the server is asked again
        only when the retry policy's backoff ends, so a dead server costs one deadline
        per backoff, not one per ``stat``. Returns whether the default or its presets changed."""
        if self.fresh or self._retries.waiting:
            return False
        async with self._lock:
            if self.fresh or self._retries.waiting:
                return False
            try:
                changed = self.observe(*await self._learn())
                self._retries.succeeded()
                return changed
            except errors.KgError as exc:
                self._retries.failed()
                log.info("could not refresh the server default: %s", exc)
        return False

    def error_since(self, fetched_at: float | None) -> str | None:
        """Why the server could not be reached at the last look, if that look came after
        ``fetched_at`` (trio clock): a listing fetched since then proves it answered."""
        if self.server_error is None or (fetched_at is not None
                                         and fetched_at > self._failed_at):
            return None
        return self.server_error

    async def look(self) -> Polled:
        """A look at the server now (one epoch GET), before ``.meta/status`` is shown: a
        stopped server shows on this read. It shares a poll under way; after a poll that
        timed out it leaves the server to the poller and the listings' own fetches, so a
        stalled server costs the reader one deadline, not one per read."""
        if self._polling is not None:
            await self._polling.wait()
        elif not (self.server_error is not None and self._stalled):
            return await self.poll()
        return Polled()

    async def poll(self, in_use: bool = False) -> Polled:
        """One look at the server (two cheap GETs at most; a probe search only for a
        client the admin endpoint refuses, while the mount is ``in_use``): what changed.
        A poll while one is under way waits for it and reports no change (the one under
        way reports it)."""
        if self._polling is not None:
            await self._polling.wait()
            return Polled()
        self._polling = trio.Event()
        try:
            return await self._poll(in_use)
        finally:
            self._polling.set()
            self._polling = None

    async def _poll(self, in_use: bool) -> Polled:
        default_changed = False
        try:
            seen = await self._client.epoch(timeout=self.probe_timeout)
            default_changed = await self._polled_default(seen, in_use)
        except errors.KgError as exc:
            if self.server_error is None:
                log.warning("server unavailable, serving cached listings: %s", exc)
            self.server_error = str(exc)
            self._stalled = isinstance(exc, errors.ServerTimeout)
            self._failed_at = trio.current_time()
            return Polled(default=default_changed)
        self._stalled = False
        self._retries.succeeded()  # the server answers: a lookup may go at once
        back = self.server_error is not None
        if back:
            log.info("server available again")
        self.server_error = None
        self.server_id = seen.server_id
        changed = self._epoch is not None and seen.epoch != self._epoch
        if changed:
            log.info("server content changed (epoch %s -> %s)", self._epoch, seen.epoch)
        self._epoch = seen.epoch
        return Polled(changed, default_changed, back)

    async def _polled_default(self, seen: Epoch, in_use: bool) -> bool:
        """The default the epoch response carries; from a server that does not publish
        it there, the admin endpoint where permitted, else (while ``in_use``) a probe
        search. Returns whether it changed."""
        if seen.default_threshold is not None or seen.threshold_presets is not None:
            return self.observe(seen.default_threshold, seen.threshold_presets, FROM_EPOCH)
        async with self._lock:
            value, presets = await self._from_admin()
            if value is not None:
                return self.observe(value, presets, FROM_ADMIN)
            if self._admin_readable is False and in_use:
                return self.observe(*await self._probe())
        return False

    async def _from_admin(self) -> tuple[float | None, dict[str, float] | None]:
        if self._admin_readable is False:
            return None, None
        try:
            value, presets = await self._client.admin_default_threshold(
                timeout=self.probe_timeout)
        except (errors.PermissionDenied, errors.NotFound, errors.InvalidRequest):
            self._admin_readable = False
            return None, None
        if value is not None:
            self._admin_readable = True
        return value, presets

    async def _learn(self) -> tuple[float, dict[str, float] | None, str]:
        value, presets = await self._from_admin()
        if value is not None:
            return value, presets, FROM_ADMIN
        return await self._probe()

    async def _probe(self) -> tuple[float, dict[str, float] | None, str]:
        """The default as an inheriting search reports it (``threshold_used``)."""
        response = await self._client.search(SearchRequest(PROBE_TEXT, limit=1, lean=True),
                                             timeout=self.probe_timeout)
        return response.threshold_used, response.threshold_presets, FROM_PROBE
