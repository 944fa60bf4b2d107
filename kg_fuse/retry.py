"""The one retry policy for every wait on the server: exponential backoff with jitter,
bounded, used as a schedule and never waited on in line by a FUSE handler (the shell
that asked would hang).

Its numbers (``SERVER_RETRY``), and why:

- the first retry after 0.5 s: a briefly busy or restarting server is asked again soon,
  and a burst of calls shares one attempt anyway (each waiting thing retries once);
- doubling, at most 5 s: a server that stays down gets one request per waiting thing
  every 5 s, not one per call, and a server that comes back is picked up within 5 s
  (the mount's poll may see it sooner, and then ends every wait at once);
- plus up to 0.5 s of jitter below the cap, so parts that failed together do not all
  retry in step.

So 0.5 s, 1 s, 2 s, 4 s (each plus up to 0.5 s), then every 5 s. Each thing that
waits keeps its own ``Backoff`` (the failures in a row of one thing); a success resets
it. It sits below both the client and the server's commands, which all wait on a
server; which failures are worth waiting on is the client's to say
(:data:`kg_fuse.client.errors.RETRIED`). What waits on the server:

- a listing whose fetch failed (``fs/queries/results.py``): callers during its backoff get the
  failure, or the last listing marked stale, at once; when it ends one caller fetches
  and the others wait for that fetch's outcome;
- the server default after a failed lookup (``fs/queries/watcher.py``);
- an upload from ``ingest/``, and the status of its job (``fs/queries/ingest.py``: while the
  server answers, a running job is asked every ``SERVER_RETRY.initial`` seconds);
- ``kg-fuse server start`` waiting for the new server to answer (``delays``).

The delay is one formula, written here: a retry library's wait strategies take the state
of a call they retry themselves, and nothing here is retried in line.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    initial: float
    maximum: float
    jitter: float

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row (1 or more): ``initial``
        doubled per failure after the first, plus up to ``jitter``, at most ``maximum``."""
        exponent = min(max(1, failures) - 1, 64)  # 2**64 s is past any maximum
        return min(self.initial * 2.0 ** exponent + random.uniform(0, self.jitter),
                   self.maximum)

    def delays(self) -> Iterator[float]:
        """The waits between attempts, without end (for a loop that sleeps)."""
        return (self.delay(n) for n in itertools.count(1))


SERVER_RETRY = RetryPolicy(initial=0.5, maximum=5.0, jitter=0.5)


def _now() -> float:
    import trio  # a Backoff lives inside a trio run; the policy alone needs no trio

    return trio.current_time()


@dataclass
class Backoff:
    """The failures in a row of one thing (a listing, an upload, the job polls) under
    the policy; it says when the next attempt may go (trio clock)."""

    policy: RetryPolicy = SERVER_RETRY
    failures: int = 0
    not_before: float = field(default=float("-inf"))

    def failed(self) -> float:
        """Record a failure; returns the delay until the next attempt."""
        self.failures += 1
        delay = self.policy.delay(self.failures)
        self.not_before = _now() + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = float("-inf")

    @property
    def waiting(self) -> bool:
        return _now() < self.not_before
