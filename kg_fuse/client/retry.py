"""The retry policy: exponential backoff with jitter (tenacity's ``wait_exponential_jitter``),
used as a schedule and never waited on in line. It is the one used everywhere something
failed and must not be tried again at once: uploads from ``ingest/`` (growing), a
listing after its fetch stalled and the server default after a failed lookup (each a
fixed wait).

A FUSE handler must not sleep through retries (the shell that asked would hang), so a
``Backoff`` only says when the next attempt may go: each failure in a row pushes that
time out (``initial``, doubling, at most ``maximum``, plus up to ``jitter`` seconds so
many waiting parts do not retry in step); a success resets it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import tenacity
import trio


@dataclass(frozen=True)
class RetryPolicy:
    initial: float
    maximum: float
    jitter: float

    @classmethod
    def fixed(cls, seconds: float) -> RetryPolicy:
        """The same wait after every failure (jitter would be capped away)."""
        return cls(initial=seconds, maximum=seconds, jitter=0.0)

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` failures in a row (1 or more)."""
        wait = tenacity.wait_exponential_jitter(initial=self.initial, max=self.maximum,
                                                jitter=self.jitter)
        state = tenacity.RetryCallState(None, None, (), {})
        state.attempt_number = max(1, failures)
        return wait(state)


@dataclass
class Backoff:
    """The failures in a row of one thing (an upload, a listing) under a policy."""

    policy: RetryPolicy
    failures: int = 0
    not_before: float = field(default=float("-inf"))

    def failed(self) -> float:
        """Record a failure; returns the delay until the next attempt."""
        self.failures += 1
        delay = self.policy.delay(self.failures)
        self.not_before = trio.current_time() + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = float("-inf")

    @property
    def waiting(self) -> bool:
        return trio.current_time() < self.not_before
