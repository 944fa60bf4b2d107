"""Kernel-free: the parts under the handlers, each driven directly against the real app:
the API client, the search plan, the query service and its per-query state, the catalog,
the ingest box, lookup counts, and the error convention."""

from __future__ import annotations

import errno
import json
import logging
import os

import httpx
import pyfuse3
import pytest
import trio

from kg_fuse.client import errors
from kg_fuse.client.api import KgApiClient, SearchRequest
from kg_fuse.client.credentials import Credentials
from kg_fuse.fs.kernel.errnos import errno_of
from kg_fuse.fs.kernel.nodes import NodeKind
from kg_fuse.fs.queries.ingest import JOB_SUFFIX
from kg_fuse.fs.tree.behaviour_table import BEHAVIOURS
from kg_fuse.limits import MAX_INGEST_BYTES, MIB
from kg_fuse.listing.execute import execute
from kg_fuse.listing.plan import Level, QueryPlan
from tests.helpers.core import API_URL, Core
from tests.helpers.driver import CTX

RELEVANT = "compress data with gzip"
COMPRESSION = "Data Compression and Archiving"


class CountingTransport(httpx.AsyncBaseTransport):
    """The app's transport, counting the requests that pass (``POST /query/search``...)
    and keeping the searches' bodies."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.seen: list[str] = []
        self.searches: list[dict] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(f"{request.method} {request.url.path}")
        if request.url.path == "/query/search":
            self.searches.append(json.loads(await request.aread()))
        return await self.inner.handle_async_request(request)

    def count(self, what: str) -> int:
        return self.seen.count(what)


# -- the API client -----------------------------------------------------------------------

async def test_client_searches_and_reads_concepts_with_one_token(core: Core) -> None:
    counting = CountingTransport(core.server.transport())
    client = KgApiClient(API_URL, core.server.credentials_of("user"), timeout=60,
                         transport=counting)
    try:
        found = await client.search(SearchRequest(RELEVANT, limit=5))
        assert found.results and len(found.results) <= 5
        detail = await client.concept(found.results[0].concept_id)
        assert detail.label == found.results[0].label
        assert (await client.epoch()).epoch >= 0
    finally:
        await client.aclose()
    assert counting.count("POST /auth/oauth/token") == 1  # the token is reused


async def test_client_errors_are_typed_and_carry_the_errno(core: Core) -> None:
    """Typed errors that say which call failed and how; fs.errors gives their errnos."""
    with pytest.raises(errors.NotFound) as missing:
        await core.client.concept("no-such-concept")
    assert errno_of(missing.value) == errno.ENOENT
    assert (missing.value.method, missing.value.path, missing.value.status) == (
        "GET", "/query/concept/no-such-concept", 404)
    with pytest.raises(errors.InvalidRequest):
        await core.client.search(SearchRequest(RELEVANT, limit=0))
    wrong = KgApiClient(API_URL, Credentials("kgc_nobody", "wrong", "tests"), timeout=60,
                        transport=core.server.transport())
    try:
        with pytest.raises(errors.AuthenticationFailed) as refused:
            await wrong.search(SearchRequest(RELEVANT))
        assert errno_of(refused.value) in (errno.EACCES, errno.EPERM)
    finally:
        await wrong.aclose()


async def test_an_unreachable_server_is_an_errno_not_a_crash(core: Core) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:  # fault injection: no server
        raise httpx.ConnectError("connection refused", request=request)

    dead = KgApiClient(API_URL, core.server.credentials_of("user"), timeout=5,
                       transport=httpx.MockTransport(refuse))
    try:
        with pytest.raises(errors.ServerUnreachable):
            await dead.search(SearchRequest(RELEVANT))
    finally:
        await dead.aclose()


# -- the search plan ----------------------------------------------------------------------

async def test_plan_intersects_levels_and_applies_union_and_exclude(core: Core) -> None:
    read = Level("read data from files", None)
    archives = Level("compressed archives", None)
    alone = await execute(core.client, QueryPlan((archives,), limit=1000))
    parent = await execute(core.client, QueryPlan((read,), limit=1000))
    nested = await execute(core.client, QueryPlan((read, archives), limit=100))
    ids = {h.concept_id for h in nested.hits}
    assert ids and ids <= {h.concept_id for h in alone.hits} & {h.concept_id for h in
                                                                 parent.hits}
    assert [c.role for c in nested.levels] == ["level", "level"]

    gzip_only = await execute(core.client, QueryPlan((Level(RELEVANT, None),), limit=50))
    excluded = await execute(core.client, QueryPlan((Level(RELEVANT, None),), limit=50,
                                                    exclude=("bz2 compression",)))
    assert "bz2.compress" in {h.label for h in gzip_only.hits}
    assert "bz2.compress" not in {h.label for h in excluded.hits}
    assert excluded.levels[-1].role == "exclude" and excluded.levels[-1].changed > 0
    union = await execute(core.client, QueryPlan((Level(RELEVANT, None),), limit=50,
                                                 union=("read and write CSV files",)))
    assert any(h.label.startswith("csv.") for h in union.hits)


class StallingSearches(httpx.AsyncBaseTransport):
    """Fault injection: the app, but a search whose text contains ``stall`` times out."""

    def __init__(self, inner: httpx.AsyncBaseTransport, stall: str) -> None:
        self.inner, self.stall = inner, stall

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/query/search" and self.stall in request.content.decode():
            raise httpx.ReadTimeout("the server stalled", request=request)
        return await self.inner.handle_async_request(request)


@pytest.mark.parametrize("plan", [
    QueryPlan((Level("stalled archives", None), Level(RELEVANT, None)), limit=50),
    QueryPlan((Level(RELEVANT, None),), limit=50, union=("stalled csv",)),
    QueryPlan((Level(RELEVANT, None),), limit=50, exclude=("stalled bz2",)),
], ids=["parent level", "union", "exclude"])
async def test_a_plan_whose_other_search_fails_fails_as_that_search(
        core: Core, plan: QueryPlan) -> None:
    """The searches besides the query's own run in parallel; when one times out the
    listing fails with that timeout (ETIMEDOUT, the stale listing served), not with an
    ExceptionGroup that nothing catches (EIO, "unexpected error")."""
    client = KgApiClient(API_URL, core.server.credentials_of("user"), timeout=60,
                         transport=StallingSearches(core.server.transport(), "stalled"))
    try:
        with pytest.raises(errors.ServerTimeout) as failed:
            await execute(client, plan)
        assert errno_of(failed.value) == errno.ETIMEDOUT
    finally:
        await client.aclose()


# -- the query service --------------------------------------------------------------------

async def test_identical_concurrent_listings_search_once(core: Core) -> None:
    counting = CountingTransport(core.server.transport())
    core.client._http._transport = counting  # noqa: SLF001 - count what the mount sends
    query = await core.service.create(("zip archives",))
    before = counting.count("POST /query/search")
    core.service.server.content_changed()  # the next listing must be fetched again
    listings = []

    async def list_once() -> None:
        listings.append(await core.service.results(query))

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(list_once)
    assert counting.count("POST /query/search") - before == 1  # single-flight
    assert len({id(listing) for listing in listings}) == 1


async def test_a_new_threshold_refetches_and_the_service_saves_it(core: Core) -> None:
    query = await core.service.create((RELEVANT,))
    wide = await core.service.results(query)
    await core.service.set_threshold((RELEVANT,), 0.9)
    narrow = await core.service.results(core.service.get((RELEVANT,)))
    assert set(narrow.files) < set(wide.files)
    await core.service.save_if_dirty()
    assert "0.9" in core.store_path.read_text()


@pytest.mark.fresh_server
async def test_poll_notices_new_server_content_and_drops_listings(core: Core) -> None:
    query = await core.service.create((RELEVANT,))
    await core.service.results(query)
    assert core.service.listing(query.key) is not None
    assert (await core.service.server.poll()) is False  # the first look only learns the epoch
    assert (await core.service.server.poll()) is False  # nothing changed since
    epoch = (await core.client.epoch()).epoch
    async with core.server.http("admin") as http:
        assert (await http.post("/ontology/", json={"name": "Poll probe"})).status_code == 201
    assert (await core.client.epoch()).epoch > epoch
    assert (await core.service.server.poll()) is True
    assert core.service.held.ttl(query.key) == 0  # the next ls fetches the listing again
    before = (await core.client.epoch()).epoch
    await core.service.results(core.service.get((RELEVANT,)))
    assert core.service.held.ttl(query.key) > 0 and (await core.client.epoch()).epoch == before


# -- the catalog --------------------------------------------------------------------------

async def test_catalog_matches_the_server_and_reads_documents(core: Core) -> None:
    ontologies = await core.catalog.ontologies()
    assert COMPRESSION in ontologies
    documents = await core.catalog.documents(COMPRESSION)
    assert "gzip" in documents
    body = await core.catalog.content(documents["gzip"].document_id)
    assert b"def compress(" in body


# -- the ingest box -----------------------------------------------------------------------

async def test_ingest_box_refuses_what_it_could_never_upload(core: Core) -> None:
    ingest = f"ontology/{COMPRESSION}/ingest"
    with pytest.raises(pyfuse3.FUSEError) as job_name:
        await core.fs.create(f"{ingest}/notes{JOB_SUFFIX}", b"x")
    assert job_name.value.errno == errno.EINVAL
    await core.fs.create(f"{ingest}/draft.md", b"# Draft\n\nhello\n")
    assert "draft.md" in await core.fs.listdir(ingest)
    assert await core.fs.read(f"{ingest}/draft.md") == b"# Draft\n\nhello\n"
    await core.fs.rename(f"{ingest}/draft.md", f"{ingest}/.draft.md.swp")  # temporary
    await core.fs.unlink(f"{ingest}/.draft.md.swp")  # rm before upload: nothing sent
    assert await core.fs.listdir(ingest) == []
    assert core.ingest.files == {} and core.ingest.jobs == {}
    await core.fs.create(f"{ingest}/.empty.md.tmp")  # empty, but never uploaded: it stays
    with pytest.raises(pyfuse3.FUSEError) as empty:
        await core.fs.rename(f"{ingest}/.empty.md.tmp", f"{ingest}/empty.md")
    assert empty.value.errno == errno.ENODATA
    assert await core.fs.listdir(ingest) == [".empty.md.tmp"]


OKAPI = b"# Okapi husbandry\n\nOkapis browse leaves in dense forest at dawn and dusk.\n"


@pytest.mark.fresh_server
async def test_a_file_copied_into_ingest_becomes_a_document(core: Core) -> None:
    core.ingest.delay = 0.1
    documents = f"ontology/{COMPRESSION}/documents"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(core.ingest.run)
        await core.fs.create(f"ontology/{COMPRESSION}/ingest/okapi.md", OKAPI)
        with trio.fail_after(120):
            while "okapi.md" not in await core.fs.listdir(documents):
                await trio.sleep(0.2)
            while await core.fs.listdir(f"ontology/{COMPRESSION}/ingest"):
                await trio.sleep(0.2)  # the job file goes once the job is done
        nursery.cancel_scope.cancel()
    assert await core.fs.read(f"{documents}/okapi.md") == OKAPI
    await core.fs.mkdir("okapi browsing at dawn")
    assert "Okapi husbandry.concept.md" in await core.fs.listdir("okapi browsing at dawn")


# -- lookup counts and the kernel ---------------------------------------------------------

async def test_lookup_counts_follow_the_kernel_and_forget_frees_the_inode(core: Core) -> None:
    await core.fs.mkdir(RELEVANT)
    listed = [e for e in await core.fs.readdir(RELEVANT) if e.name.endswith(".concept.md")]
    inode = listed[0].attributes.st_ino
    assert core.fs.lookups(inode) == 1  # READDIRPLUS counts as a lookup
    await core.ops.lookup(await core.fs.inode(RELEVANT), os.fsencode(listed[0].name), CTX)
    assert core.fs.lookups(inode) == 2
    core.ops.forget([(inode, 2)])
    assert core.fs.lookups(inode) == 0
    again = await core.fs.lookup(f"{RELEVANT}/{listed[0].name}")
    assert again.st_ino == inode  # result inodes are stable, keyed by query and concept


async def test_refetched_results_keep_inode_mtime_and_bytes(core: Core) -> None:
    await core.fs.mkdir(RELEVANT)
    name = sorted(n for n in await core.fs.listdir(RELEVANT) if n.endswith(".concept.md"))[0]
    first = await core.fs.stat(f"{RELEVANT}/{name}")
    body = await core.fs.read(f"{RELEVANT}/{name}")
    core.service.server.content_changed()
    await core.fs.listdir(RELEVANT)
    second = await core.fs.stat(f"{RELEVANT}/{name}")
    assert (second.st_ino, second.st_mtime_ns, second.st_size) == (
        first.st_ino, first.st_mtime_ns, first.st_size)
    assert await core.fs.read(f"{RELEVANT}/{name}") == body


# -- the error convention -----------------------------------------------------------------

async def test_an_unexpected_exception_is_eio_and_logged_never_raised(
        core: Core, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await core.fs.mkdir(RELEVANT)

    async def broken(tree: object, node: object) -> bytes:  # fault injection: a bug
        raise ValueError("a bug")

    threshold = BEHAVIOURS[NodeKind.THRESHOLD_FILE]
    monkeypatch.setattr(threshold, "content", broken)
    with caplog.at_level(logging.ERROR), pytest.raises(pyfuse3.FUSEError) as failed:
        await core.fs.read(f"{RELEVANT}/.meta/threshold")
    assert failed.value.errno == errno.EIO
    assert "unexpected error" in caplog.text and "ValueError: a bug" in caplog.text


async def test_the_kernel_forgetting_a_query_drops_its_listing_not_its_files(
        core: Core) -> None:
    """The one eviction (QueryStates.drop): once the kernel forgot a query's directory
    (so everything below it), its listing's memory goes; the next listing brings the same
    names, inodes, mtimes and sizes back."""
    await core.fs.mkdir(RELEVANT)

    def identities(listed: list) -> dict[str, tuple[int, int, int]]:
        return {e.name: (e.attributes.st_ino, e.attributes.st_mtime_ns, e.attributes.st_size)
                for e in listed if e.name.endswith(".concept.md")}

    before = identities(await core.fs.readdir(RELEVANT))
    assert before and core.service.listing(RELEVANT) is not None
    core.ops.forget([(ino, core.fs.lookups(ino)) for ino, _, _ in before.values()])
    assert core.service.listing(RELEVANT) is not None  # the directory is still held
    directory = await core.fs.inode(RELEVANT)
    core.ops.forget([(directory, core.fs.lookups(directory))])
    assert core.service.listing(RELEVANT) is None
    assert core.service.held.nbytes == 0  # its concept details too: no listing needs them
    assert identities(await core.fs.readdir(RELEVANT)) == before


async def test_removing_every_query_gives_back_every_cached_byte(core: Core) -> None:
    for text in (RELEVANT, "csv files"):
        await core.fs.mkdir(text)
        assert await core.fs.listdir(text)
    assert core.service.held.nbytes > 0
    await core.fs.rmdir(RELEVANT)
    assert core.service.held.nbytes > 0  # the other listing still uses its details
    await core.fs.rmdir("csv files")
    assert core.service.held.nbytes == 0


# Regression test (issue 40): usage.md said df never reads as a full disk, yet it reads
# 100% with 256 MiB waiting in ingest/; it does, truly: a write then fails with ENOSPC.
async def test_df_reads_full_exactly_when_a_write_into_ingest_finds_no_room(
        core: Core) -> None:
    ops, box = core.ops, f"ontology/{COMPRESSION}/ingest"
    empty = await ops.statfs(CTX)
    assert empty.f_bavail == empty.f_blocks > 0  # nothing waits: 0% used
    chunk = b"x" * MIB
    handles = []
    try:
        while True:  # files held open, so none is uploaded: all of them wait in memory
            parent, name = await core.fs._parent(f"{box}/big-{len(handles)}.md")
            info, _ = await ops.create(parent, name, 0o644, os.O_WRONLY | os.O_CREAT, CTX)
            handles.append(info.fh)
            try:
                for offset in range(0, MAX_INGEST_BYTES, MIB):
                    await ops.write(info.fh, offset, chunk)
            except pyfuse3.FUSEError as refused:
                assert refused.errno == errno.ENOSPC, refused
                break
            fs = await ops.statfs(CTX)
            assert fs.f_bavail < fs.f_blocks  # some used, not full while a write fits
        full = await ops.statfs(CTX)
        assert full.f_bavail == 0 and full.f_blocks == empty.f_blocks, full  # df: 100%
    finally:
        for fh in handles:
            await ops.release(fh)
        for n in range(len(handles)):
            await core.fs.unlink(f"{box}/big-{n}.md")
    assert (await ops.statfs(CTX)).f_bavail == empty.f_bavail  # room again once removed
