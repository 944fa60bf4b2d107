"""A rate limit on failed sign-ins at the token endpoint.

Each client id and each address has a bucket of failures that refills slowly; a failed
sign-in takes one from both, and one past either limit is answered 429 with the seconds
to wait. The limit counts only failures, after the secret was checked: a client id is
no secret, and anyone on the machine shares the loopback address, so refusing attempts
before checking them would let anyone lock a client out by failing in its name. A right
secret is never refused. Guessing stays as slow as before: every attempt costs the same
PBKDF2 hash (tens of milliseconds), and a secret is 256 random bits.
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

    def failed(self, client_id: str, address: str) -> int | None:
        """Count a failed sign-in for this client id and address; None while both are
        within their limit, else the whole seconds until the one past it has room again
        (a failure past a limit is not counted: it was refused)."""
        with self._lock:
            wait = max(self._clients.wait(client_id), self._addresses.wait(address))
            if wait > 0:
                return max(1, math.ceil(wait))
            self._clients.add(client_id, -1.0)
            self._addresses.add(address, -1.0)
            return None
