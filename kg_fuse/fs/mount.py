"""Running the filesystem: mount, serve until unmounted or signalled, clean up."""

from __future__ import annotations

import logging
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyfuse3
import trio

from kg_fuse import paths
from kg_fuse.client.api import KgApiClient
from kg_fuse.client.credentials import Connection
from kg_fuse.fs.catalog import Catalog
from kg_fuse.fs.ingest import IngestBox
from kg_fuse.fs.operations import KgOperations
from kg_fuse.fs.queries import QueryStore, StoreState
from kg_fuse.fs.service import QueryService

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


async def _watch_signals(ready: trio.Event, stop: Callable[[], None]) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        ready.set()
        async for signum in signals:
            log.info("received %s, unmounting", signal.Signals(signum).name)
            pyfuse3.terminate()
            stop()
            return


def _listed_in_mountinfo(mountpoint: str) -> bool:
    """Whether the kernel still lists our mount, read without touching the mountpoint
    (which would deadlock: this process is the one that answers for it)."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            field = line.split(" ")[4]
            decoded = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)
            if decoded == mountpoint:
                return True
    return False


async def _watch_unmount(mountpoint: str, stop: Callable[[], None]) -> None:
    """Notice an external ``fusermount3 -u`` even while handlers wait on the server."""
    while await trio.to_thread.run_sync(_listed_in_mountinfo, mountpoint):
        await trio.sleep(0.5)
    log.info("%s was unmounted", mountpoint)
    stop()


async def _watch_server(service: QueryService, catalog: Catalog, interval: float) -> None:
    """Poll the server every ``interval`` seconds; a content change empties the caches."""
    while True:
        if await service.poll():
            catalog.invalidate()
        await trio.sleep(interval)


def assemble(options: MountOptions, client: KgApiClient, store: QueryStore,
             state: StoreState) -> KgOperations:
    """The filesystem's parts, wired together: what a mount serves, and what the
    kernel-free tests drive without a kernel."""
    service = QueryService(client, store, state, poll_interval=options.poll_interval,
                           max_age=options.max_age, probe_timeout=options.probe_timeout)
    catalog = Catalog(client)

    def ingested() -> None:
        catalog.invalidate()
        service.content_changed()

    ingest = IngestBox(client, delay=options.ingest_delay, on_ingested=ingested)
    ingest.server_name = service.ontology_name = catalog.server_name
    return KgOperations(service, catalog, ingest, str(options.mountpoint),
                        allow_ontology_delete=options.allow_ontology_delete,
                        allow_document_delete=options.allow_document_delete)


async def _serve(options: MountOptions, store: QueryStore) -> None:
    state = await trio.to_thread.run_sync(store.load)
    client = KgApiClient(options.connection.api_url, options.connection.credentials,
                         timeout=options.request_timeout)
    operations = assemble(options, client, store, state)
    service, catalog, ingest = operations.service, operations.catalog, operations.ingest
    fuse_options = set(pyfuse3.default_options)
    fuse_options |= {"fsname=kg-fuse", "subtype=kg-fuse"}
    pyfuse3.init(operations, str(options.mountpoint), fuse_options)
    operations.kernel.enabled = True
    log.info("mounted %s (api %s, %d saved queries)", options.mountpoint,
             options.connection.api_url, len(state.queries))
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
            nursery.start_soon(_watch_server, service, catalog, options.poll_interval)
            nursery.start_soon(ingest.run)
            nursery.start_soon(operations.kernel.run)
            with main_scope:
                await pyfuse3.main()
            nursery.cancel_scope.cancel()
        await service.save_if_dirty()
    finally:
        pyfuse3.close(unmount=True)
        with trio.CancelScope(shield=True):
            await client.aclose()
    log.info("unmounted %s", options.mountpoint)


def run_mount(options: MountOptions) -> None:
    """Mount and serve in the foreground until unmounted, SIGINT or SIGTERM."""
    store = QueryStore(paths.mount_state_dir(options.mountpoint))
    trio.run(_serve, options, store)
