"""Searches that arrive together embed their queries in one run of the real model, and
each gets what it would have got alone."""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Any

import numpy as np
import pytest
import trio

from kg_fuse.server.embedding.embedder import Embedder
from tests.helpers.core import ServerApp

QUERIES = ["compress data with gzip", "parse a csv file", "read a tar archive member",
           "random number between two values", "current time in seconds",
           "split a path into directory and name", "asdfgh qwerty zxcvb",
           "copy a file and its permissions"]
#: How long the first run is held while the other searches arrive (they arrive in ms).
HOLD = 3.0


class HeldSession:
    """The real session, recording each run's batch size; the first run waits until a
    second run starts or ``HOLD`` seconds pass, so the other searches arrive meanwhile."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.batches: list[int] = []
        self._second = threading.Event()
        self._lock = threading.Lock()

    def run(self, outputs: Any, feeds: dict[str, np.ndarray], *rest: Any) -> Any:
        with self._lock:
            self.batches.append(len(feeds["input_ids"]))
            first = len(self.batches) == 1
        if first:
            self._second.wait(HOLD)
        else:
            self._second.set()
        return self.session.run(outputs, feeds, *rest)


def test_queries_asked_during_a_run_share_the_next_run(embedder: Embedder,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight threads ask at once: one run for the first, one for the seven that waited
    for it, and each vector is the one its text gets alone."""
    alone = np.stack([embedder.encode_queries([q])[0] for q in QUERIES])
    held = HeldSession(embedder._session)
    monkeypatch.setattr(embedder, "_session", held)
    with concurrent.futures.ThreadPoolExecutor(len(QUERIES)) as pool:
        together = np.stack(list(pool.map(embedder.encode_one, QUERIES)))
    assert held.batches == [1, len(QUERIES) - 1]
    assert np.abs(together - alone).max() < 1e-6


def test_a_failed_run_fails_every_search_in_it(embedder: Embedder,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that raises gives its error to each search waiting on it, and the next
    search embeds normally (nothing is left waiting)."""

    class Broken:
        def run(self, *args: Any) -> Any:
            raise RuntimeError("the runtime failed")

    session = embedder._session
    monkeypatch.setattr(embedder, "_session", Broken())
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(embedder.encode_one, q) for q in QUERIES[:4]]
        for future in futures:
            with pytest.raises(RuntimeError, match="the runtime failed"):
                future.result(timeout=60)
    monkeypatch.setattr(embedder, "_session", session)
    assert embedder.encode_one(QUERIES[0]) == pytest.approx(
        embedder.encode_queries([QUERIES[0]])[0], abs=1e-6)


async def search_all(app: ServerApp, queries: list[str], at_once: bool
                     ) -> dict[str, list[tuple[str, float]]]:
    found: dict[str, list[tuple[str, float]]] = {}
    async with app.http("user") as http:
        async def search(query: str) -> None:
            response = await http.post("/query/search", json={"query": query})
            assert response.status_code == 200, response.text
            found[query] = [(r["concept_id"], r["score"]) for r in response.json()["results"]]

        if at_once:
            async with trio.open_nursery() as nursery:
                for query in queries:
                    nursery.start_soon(search, query)
        else:
            for query in queries:
                await search(query)
    return found


@pytest.mark.fresh_server
async def test_concurrent_searches_list_what_sequential_ones_do(
        server_app: ServerApp, shared_app: ServerApp, embedder: Embedder,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight searches sent at once to a fresh server embed in two runs (the query of noise
    in none), and list the same concepts with the same scores as the same searches one
    after another elsewhere."""
    assert server_app is not shared_app
    one_by_one = await search_all(shared_app, QUERIES, at_once=False)
    held = HeldSession(embedder._session)
    monkeypatch.setattr(embedder, "_session", held)
    together = await search_all(server_app, QUERIES, at_once=True)
    assert held.batches == [1, len(QUERIES) - 2]
    assert any(one_by_one.values())
    for query in QUERIES:
        assert [cid for cid, _ in together[query]] == [cid for cid, _ in one_by_one[query]]
        assert [s for _, s in together[query]] == pytest.approx(
            [s for _, s in one_by_one[query]], abs=1e-5)


async def test_a_query_of_noise_lists_nothing_without_running_the_model(
        server_app: ServerApp, embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query none of whose words the corpus knows counts its vector for nothing, so its
    search runs no model (the same answer, without the cost): every concept scores 0,
    which is no match, so it lists nothing at the default nor at 0."""
    noise = "vlorp snizzle"  # asked nowhere else: no answer of it is cached
    assert server_app.graph.searcher.read(noise).familiarity(None) == 0
    held = HeldSession(embedder._session)
    monkeypatch.setattr(embedder, "_session", held)
    async with server_app.http("user") as http:
        default = (await http.post("/query/search", json={"query": noise})).json()
        at_zero = (await http.post("/query/search",
                                   json={"query": noise, "min_similarity": 0.0})).json()
    assert held.batches == []
    assert default["results"] == [] and default["near_misses"] is None
    assert at_zero["count"] == 0 and at_zero["results"] == []
    assert at_zero["threshold_used"] == 0.0  # an explicit 0 still wins
