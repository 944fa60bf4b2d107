"""The platform's recorded answers, replayed to a ``KgApiClient`` (``tests/replay``).

``ReplayTransport`` is an ``httpx.AsyncBaseTransport`` over one recording made by the live
tier (``tests.helpers.recorder``): a request is matched on its method, path, query
parameters and body (tokens, client ids and secrets ignored) and on who sends it, and
answered as the platform answered it then.

- **Phases.** The scenario names the platform's state changes as the live run did
  (``Replay.phase``); a request is looked for in the current phase first, then in the
  earlier ones, latest first (the recording keeps an answer once when a later phase only
  repeated it), and a request of another client as a last resort.
- **Order.** Within a phase, repeated identical requests get the recorded answers in
  order, the last one repeated after. A request also catches up with the others: it
  never gets an answer older than the newest one already served (the live run's
  requests arrived in that order), so a listing asked for after an epoch that moved
  shows what the platform listed by then, however often either was asked.
- **A shallower search.** A ``POST /query/search`` asking for fewer results (``limit``)
  than a recorded one, every other field the same, gets the recorded page's first
  ``limit`` results: the platform ranks the same way whatever the page's size, so the
  mount may fetch less than it did when the run was recorded without a recording
  failing. The answer's hints (``below_threshold_count``, ``suggested_threshold``,
  ``top_match``), which the platform computes over twice the page, stay as recorded for
  the deeper page: record again to replay those exactly. No other field is tolerated,
  and a deeper search than any recorded is a request not in the recording.
- **Outage.** ``Replay.server_down()`` makes every request fail with
  ``httpx.ConnectError``, as a dead server's connection refused does, until
  ``server_up()``.
- **A request not in the recording** raises ``UnrecordedRequest`` (an AssertionError)
  naming it and saying how to record again, and is kept in ``Replay.misses`` so a test
  reports it even when the filesystem turned it into an errno.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.recorder import (
    FORMAT,
    canonical_request,
    exchange_key,
    request_body,
    response_bytes,
    scrub_request,
    split_target,
    unshelve_texts,
)

HOW_TO_RECORD = ("record the platform's answers again: `pytest -m platform` with a "
                 "platform running (./scripts/platform.sh up, docs/platform.md), then "
                 "review and commit the diff of tests/replay/recordings/")


class UnrecordedRequest(AssertionError):
    """The filesystem sent a request the platform was never asked while recording."""


class Replay:
    """One recording, being replayed: its phase, whether its server is up, what was served."""

    def __init__(self, data: Mapping[str, Any], source: str = "recording") -> None:
        if data.get("format") != FORMAT:
            raise UnrecordedRequest(f"{source} has format {data.get('format')!r}, not "
                                    f"{FORMAT}: {HOW_TO_RECORD}")
        self.source = source
        self.name: str = data["scenario"]
        self.names: dict[str, Any] = dict(data["names"])
        self.phases: list[str] = list(data["phases"])
        self.exchanges: list[dict[str, Any]] = unshelve_texts(list(data["exchanges"]),
                                                              data.get("texts", {}))
        self._by_slot: dict[tuple[str, str, str], list[int]] = {}
        #: each recorded search, by its key without ``limit``: (limit, its full key)
        self._searches: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
        for position, exchange in enumerate(self.exchanges):
            slot = (exchange["phase"], exchange["who"], exchange_key(exchange))
            self._by_slot.setdefault(slot, []).append(position)
        for (phase, sender, key), positions in self._by_slot.items():
            first = self.exchanges[positions[0]]
            depthless = _without_limit(first["method"], first["path"], first["params"],
                                       first["request"])
            if depthless is not None:
                self._searches.setdefault((phase, sender, depthless[1]), []).append(
                    (depthless[0], key))
        self._whos = sorted({e["who"] for e in self.exchanges})
        self._phase = 0
        self.down = False
        self._served: dict[tuple[str, str, str, str], int] = {}  # slot + asker -> position
        self._clock: dict[str, int] = {}  # phase -> newest position served
        self.misses: list[str] = []

    @classmethod
    def load(cls, path: Path) -> Replay:
        return cls(json.loads(path.read_text()), source=str(path))

    # -- the scenario's side --------------------------------------------------------------

    @property
    def phase_name(self) -> str:
        return self.phases[self._phase]

    def phase(self, name: str) -> None:
        """The platform's state changed as it did at this point of the live run."""
        if name not in self.phases[self._phase + 1:]:
            raise self._miss(f"phase {name!r} after {self.phase_name!r} (the recording's "
                             f"phases: {self.phases})")
        self._phase = self.phases.index(name)

    def server_down(self) -> None:
        self.down = True

    def server_up(self) -> None:
        self.down = False

    def transport(self, who: str) -> ReplayTransport:
        """What ``who``'s client sends through (a name the live run gave its client)."""
        return ReplayTransport(self, who)

    # -- answering --------------------------------------------------------------------------

    def _miss(self, what: str) -> UnrecordedRequest:
        message = f"{what} is not in {self.source}: {HOW_TO_RECORD}"
        self.misses.append(message)
        return UnrecordedRequest(message)

    def answer(self, who: str, method: str, path: str, params: list[list[str]],
               body: dict[str, Any] | None) -> dict[str, Any]:
        key = canonical_request(method, path, params, body)
        depthless = _without_limit(method, path, params, body)
        current = self.phase_name
        earlier = list(reversed(self.phases[:self._phase]))
        others = [w for w in self._whos if w != who]
        for sender in (who, *others):
            recorded = self._recorded(current, sender, key, depthless)
            if recorded is not None:
                return _first(self._in_order((current, sender, recorded), who), depthless)
            for phase in earlier:
                recorded = self._recorded(phase, sender, key, depthless)
                if recorded is not None:  # that phase's last word
                    return _first(self.exchanges[self._by_slot[(phase, sender, recorded)][-1]],
                                  depthless)
        shown = json.dumps(body, sort_keys=True)[:400] if body is not None else "no body"
        query = "&".join(f"{k}={v}" for k, v in params)
        raise self._miss(f"{method} {path}{'?' + query if query else ''} ({shown}) sent by "
                         f"{who!r} in phase {current!r} of scenario {self.name!r}")

    def _recorded(self, phase: str, sender: str, key: str,
                  depthless: tuple[int, str] | None) -> str | None:
        """The recorded key that answers ``key`` in ``phase`` from ``sender``: itself, else
        (a search) the shallowest recorded search as deep or deeper."""
        if (phase, sender, key) in self._by_slot:
            return key
        if depthless is None:
            return None
        limit, rest = depthless
        deeper = [(n, k) for n, k in self._searches.get((phase, sender, rest), ()) if n >= limit]
        return min(deeper)[1] if deeper else None

    def _in_order(self, slot: tuple[str, str, str], asker: str) -> dict[str, Any]:
        positions = self._by_slot[slot]
        served = self._served.get((*slot, asker))
        step = 0 if served is None else min(positions.index(served) + 1, len(positions) - 1)
        clock = self._clock.get(slot[0], -1)
        caught_up = max((i for i, p in enumerate(positions) if p <= clock), default=step)
        chosen = positions[max(step, caught_up)]
        self._served[(*slot, asker)] = chosen
        self._clock[slot[0]] = max(clock, chosen)
        return self.exchanges[chosen]


def _without_limit(method: str, path: str, params: list[list[str]],
                   body: dict[str, Any] | None) -> tuple[int, str] | None:
    """A search request's ``limit`` and its key without it; None for any other request."""
    payload = (body or {}).get("json")
    if method.upper() != "POST" or path != "/query/search" or not isinstance(payload, dict) \
            or not isinstance(payload.get("limit"), int):
        return None
    rest = {k: v for k, v in payload.items() if k != "limit"}
    return payload["limit"], canonical_request(method, path, params, {**body, "json": rest})


def _first(exchange: dict[str, Any], depthless: tuple[int, str] | None) -> dict[str, Any]:
    """A recorded search's answer cut to the ``limit`` asked (a shallower search)."""
    answer = exchange["response"].get("json")
    if depthless is None or not isinstance(answer, dict) \
            or len(answer.get("results") or ()) <= depthless[0]:
        return exchange
    cut = copy.deepcopy(exchange)
    body = cut["response"]["json"]
    body["results"] = body["results"][:depthless[0]]
    if "count" in body:
        body["count"] = len(body["results"])
    return cut


class ReplayTransport(httpx.AsyncBaseTransport):
    """One client's way to the recorded platform (see the module docstring)."""

    def __init__(self, replay: Replay, who: str) -> None:
        self.replay = replay
        self.who = who

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.replay.down:
            raise httpx.ConnectError("[Errno 111] Connection refused (replayed outage)",
                                     request=request)
        content = await request.aread()
        body = scrub_request(request_body(content, request.headers.get("content-type")),
                             self.who)
        path, params = split_target(request.url.raw_path.decode("ascii"))
        exchange = self.replay.answer(self.who, request.method, path, params, body)
        headers = {"content-type": exchange["content_type"]} if exchange["content_type"] \
            else {}
        return httpx.Response(exchange["status"], headers=headers,
                              content=response_bytes(exchange["response"]), request=request)
