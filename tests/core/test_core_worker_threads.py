"""A request's Python work stays on the event loop unless it blocks: each hop to a worker
thread and back is time under the GIL that searches sent together queue for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
import pytest

from tests.helpers.core import ServerApp


def _name(call: Callable[..., Any]) -> str:
    target = getattr(call, "func", call)  # run_in_threadpool wraps it in a partial
    return getattr(target, "__name__", type(target).__name__)


def record_worker_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the calls sent to a worker thread from now on, in order."""
    sent: list[str] = []
    real: Callable[..., Awaitable[Any]] = anyio.to_thread.run_sync

    async def recorded(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        sent.append(_name(call))
        return await real(call, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", recorded)
    return sent


async def test_a_search_uses_a_worker_thread_for_its_token_and_its_search(
        server_app: ServerApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the token's lookup in the store and the search block; the dependencies that
    read an attribute (the context, the store, the principal already found) do not
    leave the event loop."""
    async with server_app.http("user") as http:
        sent = record_worker_threads(monkeypatch)
        response = await http.post("/query/search", json={"query": "parse a csv file"})
        assert response.status_code == 200, response.text
        assert sent == ["authenticate", "_run_search"]
        sent.clear()
        response = await http.get("/admin/config/search-threshold")
        assert response.status_code == 403
        assert sent == ["authenticate"]  # refused before the route runs
