"""Running the filesystem: mount, serve until unmounted or signalled, clean up."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyfuse3
import trio

from kg_fuse import paths
from kg_fuse.client import errors
from kg_fuse.client.api import Epoch, KgApiClient
from kg_fuse.client.credentials import Connection
from kg_fuse.fs.handlers.operations import KgOperations
from kg_fuse.fs.kernel import mounts
from kg_fuse.fs.kernel.nodes import InodeTable
from kg_fuse.fs.kernel.notices import KernelCache
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.details import ConceptDetails
from kg_fuse.fs.queries.facade import QueryService
from kg_fuse.fs.queries.ingest import IngestBox
from kg_fuse.fs.queries.invalidation import Invalidation
from kg_fuse.fs.queries.planner import Planner
from kg_fuse.fs.queries.registry import QueryRegistry
from kg_fuse.fs.queries.results import ResultCache
from kg_fuse.fs.queries.servers import Opened, ServerStores
from kg_fuse.fs.queries.state import QueryStates
from kg_fuse.fs.queries.watcher import ServerWatcher
from kg_fuse.fs.tree.attrs import Attributes
from kg_fuse.fs.tree.meta.scratch import ScratchFiles
from kg_fuse.fs.tree.mount_tree import Tree

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MountOptions:
    mountpoint: Path
    connection: Connection
    poll_interval: float = 5.0
    max_age: float = 60.0
    request_timeout: float = 5.0
    probe_timeout: float = 2.0
    ingest_delay: float = 2.0
    allow_ontology_delete: bool = False
    allow_document_delete: bool = False


SHUTDOWN_GRACE = 1.0  # seconds handlers in flight get to finish once we are unmounting


class CredentialsRejected(RuntimeError):
    """The server refused the mount's client credentials."""


async def _check_credentials(client: KgApiClient, api_url: str, timeout: float
                             ) -> Epoch | None:
    """Rejected credentials fail the mount now, with the server's reason, instead of
    every later ``ls`` with EACCES. A server that cannot be reached does not: the mount
    serves what needs no server and catches up when it answers. Returns its answer
    (None: it did not answer), which says whose saved queries to show."""
    try:
        return await client.epoch(timeout=timeout)
    except errors.AuthenticationFailed as exc:
        raise CredentialsRejected(f"the server at {api_url} rejected the credentials: "
                                  f"{exc}") from None
    except errors.KgError as exc:
        log.info("the credentials could not be checked (%s); mounting anyway", exc)
        return None


async def first_look(client: KgApiClient, stores: ServerStores, timeout: float) -> Opened:
    """What a mount does as it starts: check its credentials (``CredentialsRejected``),
    and open the saved queries of the server that answers (``open_queries``)."""
    seen = await _check_credentials(client, client.api_url, timeout)
    return await open_queries(stores, seen)


async def open_queries(stores: ServerStores, seen: Epoch | None) -> Opened:
    """The saved queries a mount starts with: those of the server that answered
    (``seen``), else of the server its address last was; said in the log."""
    opened = await trio.to_thread.run_sync(stores.open_for, seen is not None,
                                           seen.server_id if seen is not None else None)
    if opened.provisional:
        log.info("no server answers at %s, and none ever did at this mountpoint: the %d "
                 "saved queries made meanwhile go to the first server that answers",
                 stores.address, len(opened.state.queries))
    else:
        log.info("showing the %d saved queries of %s%s", len(opened.state.queries),
                 opened.owner.label, "" if seen is not None else
                 " (the server last seen at this address: it does not answer now)")
    return opened


async def _watch_signals(ready: trio.Event, stop: Callable[[], None]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        ready.set()
        async for signum in signals:
            log.info("received %s, unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            stop()
            return


async def _watch_unmount(mountpoint: str, stop: Callable[[], None]) -> None:
    """Notice an external ``fusermount3 -u`` even while handlers wait on the server: a
    wait on the mount table's change event (opened before the first look: no change is
    missed)."""
    with open(mounts.MOUNTINFO, "rb") as table:
        while await trio.to_thread.run_sync(mounts.listed, mountpoint):
            await trio.to_thread.run_sync(mounts.wait_for_mount_change, table,
                                          abandon_on_cancel=True)
    log.info("%s was unmounted", mountpoint)
    stop()


async def _watch_server(service: QueryService, interval: float) -> None:
    """Every ``interval`` seconds: housekeeping, one look at the server (what changed
    goes to the invalidation), and the learned default saved if it changed."""
    while True:
        service.held.tidy()
        await service.server.poll()
        await service.follow_server()
        await service.save_if_dirty()
        await trio.sleep(interval)


def assemble(options: MountOptions, client: KgApiClient, stores: ServerStores,
             opened: Opened) -> KgOperations:
    """The filesystem's parts, made from the bottom up, each handed what it uses below
    it (no part is patched or told whom to call back once made): what a mount serves,
    and what the kernel-free tests drive without a kernel. Inside a trio run (the parts
    make trio locks)."""
    inodes, kernel = InodeTable(), KernelCache()
    registry = QueryRegistry(opened)
    state = opened.state
    states = QueryStates()
    details = ConceptDetails(client, options.max_age)
    catalog = Catalog(client)
    invalidation = Invalidation(registry, states, details, catalog, inodes, kernel)
    watcher = ServerWatcher(client, options.max_age, options.probe_timeout,
                            state.server_default_seen, state.server_presets_seen)
    listings = ResultCache(client, options.max_age, states, details)
    planner = Planner(client, registry, watcher, catalog)
    service = QueryService(registry, planner, listings, watcher, invalidation, stores)
    ingest = IngestBox(client, service, catalog, delay=options.ingest_delay)
    tree = Tree(service, catalog, ingest, inodes, kernel, ScratchFiles(service.held.scratch),
                Attributes(started_ns=time.time_ns()), str(options.mountpoint),
                options.allow_ontology_delete, options.allow_document_delete)
    return KgOperations(tree, kernel)


async def _serve(options: MountOptions, stores: ServerStores) -> None:
    client = KgApiClient(options.connection.api_url, options.connection.credentials,
                         timeout=options.request_timeout,
                         reread_credentials=options.connection.reread)
    try:
        opened = await first_look(client, stores, options.probe_timeout)
    except BaseException:
        await client.aclose()
        raise
    operations = assemble(options, client, stores, opened)
    tree = operations.tree
    fuse_options = set(pyfuse3.default_options)
    # the names the mount table shows: how status and unmount know a mount is ours
    fuse_options |= {f"fsname={mounts.FSNAME}", f"subtype={mounts.SUBTYPE}"}
    pyfuse3.init(operations, str(options.mountpoint), fuse_options)
    operations.kernel.enabled = True
    log.info("mounted %s (api %s, %d saved queries)", options.mountpoint,
             options.connection.api_url, len(opened.state.queries))
    try:
        async with trio.open_nursery() as nursery:
            main_scope = trio.CancelScope()

            async def cancel_in_flight() -> None:
                await trio.sleep(SHUTDOWN_GRACE)
                main_scope.cancel()

            def stop() -> None:
                nursery.start_soon(cancel_in_flight)

            ready = trio.Event()
            nursery.start_soon(_watch_signals, ready, stop)
            await ready.wait()
            nursery.start_soon(_watch_unmount, str(options.mountpoint), stop)
            nursery.start_soon(_watch_server, tree.service, options.poll_interval)
            nursery.start_soon(tree.ingest.run)
            nursery.start_soon(operations.kernel.run)
            with main_scope:
                await pyfuse3.main()
            nursery.cancel_scope.cancel()
        await tree.service.save_if_dirty()
    finally:
        pyfuse3.close(unmount=True)
        with trio.CancelScope(shield=True):
            await client.aclose()
    log.info("unmounted %s", options.mountpoint)


def run_mount(options: MountOptions) -> None:
    """Mount and serve in the foreground until unmounted, SIGINT or SIGTERM."""
    stores = ServerStores(paths.mount_state_dir(options.mountpoint),
                          options.connection.api_url)
    trio.run(_serve, options, stores)
