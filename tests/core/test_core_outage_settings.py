"""A setting written while the server cannot be reached (kernel-free tier, real app behind
a switch): it is saved at once, ``ls`` keeps showing the last listing, the status says
the setting waits for the server and which listing it shows, and once the server
answers the listing follows the setting."""

from __future__ import annotations

import tomllib

import httpx
import pytest

from tests.helpers.core import Core

QUERY = "compress data with gzip"


class Switch(httpx.AsyncBaseTransport):
    """The app, or no server at all (connection refused) while ``down``."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.down = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return await self.inner.handle_async_request(request)


def results(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.endswith(".concept.md"))


async def status(core: Core, query: str) -> dict[str, str]:
    text = (await core.fs.read(f"{query}/.meta/status")).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


# Regression test (issue 34): with the server stopped, `echo 0.5 > Q/.meta/threshold;
# ls Q` failed with ECONNREFUSED, and the status showed the new threshold with the old
# listing's counts.
async def test_a_setting_written_while_the_server_is_down_waits_for_it(core: Core) -> None:
    switch = Switch(core.server.transport())
    core.client._http._transport = switch  # noqa: SLF001 - the server goes away here
    await core.fs.mkdir(QUERY)
    before = results(await core.fs.listdir(QUERY))
    default = (await status(core, QUERY))["threshold used by the server"]

    switch.down = True
    await core.fs.write(f"{QUERY}/.meta/threshold", b"0.5\n")  # accepted, and saved
    saved = tomllib.loads(core.store_path.read_text())
    assert [q["threshold"] for q in saved["queries"] if q["text"] == QUERY] == [0.5]
    assert results(await core.fs.listdir(QUERY)) == before  # the last listing, at once
    assert (await core.fs.read(f"{QUERY}/{before[0]}")).startswith(b"---\n")
    lines = await status(core, QUERY)
    assert lines["effective threshold"] == "0.5 (override)"
    assert lines["pending"] == (
        "the settings changed while the server could not be reached; they apply once it "
        "answers, and until then the directory shows the last listing, fetched for the "
        f"earlier settings (threshold {default}, limit 50)")
    assert lines["results"] == str(len(before))
    assert lines["fetched"].endswith("(stale: server unavailable)")
    assert "connect" in lines["error"].lower()
    # nothing of the old listing is told as if it were the new threshold's
    assert lines["level 1"] == "0.5 (own value) for 'compress data with gzip', this query"
    assert "more" not in lines and "filtered by" not in lines
    assert lines["cut"].startswith(f"after {len(before)} of ")

    switch.down = False
    await core.service.server.poll()  # the server answers again
    after = results(await core.fs.listdir(QUERY))
    assert set(after) <= set(before)  # 0.5, above the default: never more
    lines = await status(core, QUERY)
    assert "pending" not in lines and lines["fetched"].endswith("(fresh)")
    assert lines["threshold used by the server"] == "0.5"
    assert lines["results"] == str(len(after))


# Regression test (issue 39): once the server's content had changed, an ontology's
# documents listing failed with "Connection refused" during an outage, while the query
# listings beside it were served from what was held.
@pytest.mark.fresh_server
async def test_the_catalog_last_listed_is_served_while_the_server_is_down(core: Core
                                                                          ) -> None:
    switch = Switch(core.server.transport())
    core.client._http._transport = switch  # noqa: SLF001 - the server goes away here
    ontologies = await core.fs.listdir("ontology")
    ontology = next(name for name in ontologies if not name.startswith("."))
    documents = await core.fs.listdir(f"ontology/{ontology}/documents")
    assert documents
    await core.service.server.poll()  # the epoch as it is now
    async with core.server.http("admin") as http:  # someone else changes the content
        (await http.post("/ontology/", json={"name": "Notes added meanwhile"})
         ).raise_for_status()
    assert await core.service.server.poll()  # this mount notices

    switch.down = True
    assert await core.fs.listdir(f"ontology/{ontology}/documents") == documents
    assert await core.fs.listdir("ontology") == ontologies  # as last listed

    switch.down = False
    assert "Notes added meanwhile" in await core.fs.listdir("ontology")
