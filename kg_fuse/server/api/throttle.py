"""A small rate limit on failed sign-ins at the token endpoint.

Every attempt costs a PBKDF2 hash (tens of milliseconds of CPU), so a flood of wrong
secrets slows every search and lets a guesser try secrets fast. Each client id and each
address has a bucket of attempts that refills slowly; an attempt takes one from both
before the secret is checked, and a correct secret gives it back: a client that knows
its secret is never throttled by its own sign-ins, however often it signs in.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import LRUCache


@dataclass(frozen=True)
class Rate:
    """At most ``burst`` failed attempts at once, then one more every ``every`` s."""

    burst: int
    every: float


#: Failed sign-ins allowed per client id, and per address (a few clients share one).
PER_CLIENT = Rate(burst=10, every=6.0)
PER_ADDRESS = Rate(burst=30, every=2.0)
#: Buckets remembered per kind; an evicted bucket is full again (ids are client-chosen).
REMEMBERED = 4096


class _Buckets:
    """Attempts left per key under one rate, refilled as time passes."""

    def __init__(self, rate: Rate, clock: Callable[[], float]) -> None:
        self.rate = rate
        self._clock = clock
        self._left: LRUCache[str, tuple[float, float]] = LRUCache(REMEMBERED)

    def left(self, key: str) -> float:
        attempts, since = self._left.get(key, (float(self.rate.burst), self._clock()))
        refilled = (self._clock() - since) / self.rate.every
        return min(float(self.rate.burst), attempts + refilled)

    def add(self, key: str, delta: float) -> None:
        self._left[key] = (self.left(key) + delta, self._clock())

    def wait(self, key: str) -> float:
        """Seconds until the key has an attempt again."""
        return max(0.0, (1.0 - self.left(key)) * self.rate.every)


class SignInLimit:
    """Failed sign-ins per client id and per address (see the module docstring)."""

    def __init__(self, per_client: Rate = PER_CLIENT, per_address: Rate = PER_ADDRESS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clients = _Buckets(per_client, clock)
        self._addresses = _Buckets(per_address, clock)
        self._lock = threading.Lock()

    def reserve(self, client_id: str, address: str) -> int | None:
        """Take an attempt for this client id and address; None when taken, else the
        whole seconds to wait (nothing is taken then)."""
        with self._lock:
            wait = max(self._clients.wait(client_id), self._addresses.wait(address))
            if wait > 0:
                return max(1, math.ceil(wait))
            self._clients.add(client_id, -1.0)
            self._addresses.add(address, -1.0)
            return None

    def refund(self, client_id: str, address: str) -> None:
        """Give back an attempt whose secret was right."""
        with self._lock:
            self._clients.add(client_id, 1.0)
            self._addresses.add(address, 1.0)
