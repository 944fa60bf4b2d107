"""The recordings themselves: what the recording proxy keeps (and never keeps), and how the
replay answers from it. The replay tier is only as true as these."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.recorder import LOCAL_PATH, SECRET, TOKEN, TOKEN_FIELDS, Recorder
from tests.helpers.replay import Replay, UnrecordedRequest

RECORDINGS = Path(__file__).parent / "recordings"


def _strings_under(value: Any, key: str | None = None) -> Iterator[tuple[str | None, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings_under(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings_under(v, key)
    else:
        yield key, value


@pytest.mark.parametrize("path", sorted(RECORDINGS.glob("*.json")), ids=lambda p: p.stem)
def test_a_committed_recording_keeps_no_secret_and_no_machine_path(path: Path) -> None:
    text = path.read_text()
    assert "kg-cli-" not in text  # a personal client's id: each is named for who it is
    assert '"authorization"' not in text.lower()
    for key, value in _strings_under(json.loads(text)):
        if key in TOKEN_FIELDS:
            assert value in (None, TOKEN), (key, value)
        if key in ("client_secret", "password"):
            assert value == SECRET, key
        if isinstance(value, str):
            assert not LOCAL_PATH.search(value), value


class _Upstream(BaseHTTPRequestHandler):
    """A tiny API: a token per sign-in, a counter that moves, an echo of the token."""

    protocol_version = "HTTP/1.1"
    counter = itertools.count(1)
    tokens = itertools.count(1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def _reply(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._reply({"access_token": f"live-token-{next(self.tokens)}",
                     "token_type": "Bearer", "expires_in": 3600, "refresh_token": None})

    def do_GET(self) -> None:
        if self.path == "/counter":
            self._reply({"n": next(self.counter)})
        else:
            self._reply({"you": self.headers.get("Authorization")})


@pytest.fixture
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_what_was_recorded_is_replayed_by_phase_in_order(upstream: str,
                                                                tmp_path: Path) -> None:
    recorder = Recorder(upstream).start()
    recorder.name_client("admin-client-id", "admin", "admin-secret")
    recorder.begin("unit", {"token": "t"})
    with httpx.Client(base_url=recorder.url) as http:
        token = http.post("/auth/oauth/token", data={
            "grant_type": "client_credentials", "client_id": "admin-client-id",
            "client_secret": "admin-secret"}).json()["access_token"]
        http.headers["Authorization"] = f"Bearer {token}"
        assert [http.get("/counter").json()["n"] for _ in range(3)] == [1, 2, 3]
        assert http.get("/who").json() == {"you": f"Bearer {token}"}
        recorder.phase("later")
        assert http.get("/counter").json()["n"] == 4
    port = recorder.port
    recorder.stop()  # the outage: refused, as by a dead server
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{recorder.url}/counter", headers={"Authorization": f"Bearer {token}"})
    recorder.start()
    assert recorder.port == port
    assert httpx.get(f"{recorder.url}/counter",
                     headers={"Authorization": f"Bearer {token}"}).json()["n"] == 5
    saved = recorder.save(tmp_path / "unit.json")
    recorder.close()
    text = saved.read_text()
    assert token not in text and "admin-secret" not in text and "admin-client-id" not in text

    replay = Replay.load(saved)
    async with httpx.AsyncClient(transport=replay.transport("admin"),
                                 base_url="http://replayed") as http:
        signed_in = await http.post("/auth/oauth/token", data={
            "grant_type": "client_credentials", "client_id": "any", "client_secret": "any"})
        assert signed_in.json()["access_token"] == TOKEN
        assert [(await http.get("/counter")).json()["n"] for _ in range(4)] == [1, 2, 3, 3]
        replay.phase("later")
        assert [(await http.get("/counter")).json()["n"] for _ in range(3)] == [4, 5, 5]
        # asked only before: the earlier phase's answer, its token scrubbed
        assert (await http.get("/who")).json() == {"you": f"Bearer {TOKEN}"}
        with pytest.raises(UnrecordedRequest, match=r"GET /never .*`pytest -m platform`"):
            await http.get("/never")
        replay.server_down()
        with pytest.raises(httpx.ConnectError):
            await http.get("/counter")
    assert len(replay.misses) == 1
    with pytest.raises(UnrecordedRequest, match="phase 'earlier'"):
        replay.phase("earlier")


def _search(limit: int, results: int, **fields: Any) -> dict[str, Any]:
    """A recorded search exchange: ``limit`` asked, ``results`` answered."""
    return {"phase": "start", "who": "admin", "method": "POST", "path": "/query/search",
            "params": [], "request": {"json": {"query": "flour", "limit": limit, "offset": 0,
                                               **fields}},
            "status": 200, "content_type": "application/json",
            "response": {"json": {"query": "flour", "count": results, "offset": 0,
                                  "results": [{"concept_id": f"c{i}", "score": 1 - i / 100}
                                              for i in range(results)],
                                  "below_threshold_count": None}}}


async def test_a_shallower_search_is_answered_by_a_deeper_recorded_one() -> None:
    """The mount may ask the platform for fewer results than when the run was recorded
    (issue 42: a listing's size and one more, not 50): the recorded page's first results
    answer it. A deeper search, or one that differs in any other field, is not recorded."""
    replay = Replay({"format": 1, "scenario": "unit", "names": {}, "phases": ["start"],
                     "exchanges": [_search(50, 30), _search(100, 30, min_similarity=0.5)]})
    async with httpx.AsyncClient(transport=replay.transport("admin"),
                                 base_url="http://replayed") as http:
        async def search(limit: int, **fields: Any) -> dict[str, Any]:
            body = {"query": "flour", "limit": limit, "offset": 0, **fields}
            return (await http.post("/query/search", json=body)).json()

        shallow = await search(13)
        assert [r["concept_id"] for r in shallow["results"]] == [f"c{i}" for i in range(13)]
        assert shallow["count"] == 13
        assert len((await search(50))["results"]) == 30  # as recorded
        assert len((await search(5, min_similarity=0.5))["results"]) == 5
        with pytest.raises(UnrecordedRequest, match="limit"):
            await search(51)
        with pytest.raises(UnrecordedRequest, match="offset"):
            await search(13, offset=13)
