"""Whose saved queries a mount shows: each server's own.

A mountpoint keeps one query store per server (``servers/<server>/queries.toml`` in its
state directory), so mounting another server at the same path shows that server's
queries, not the last one's. A server is who it says it is: the embedded server reports
an identity in its epoch response (made once per data directory); a server that reports
none (the platform) is known by its normalised address. Which server each address last
was is remembered (``servers.json``), so a mount started while its server is down shows
that server's queries. A mount that never saw its address answer keeps the queries made
meanwhile for the address, provisionally: the first server that answers gets them
(``adopt``). The single store of an earlier kg-fuse (``queries.toml`` beside the
servers) is given, once, to the first server the mount reaches, and kept as
``queries.toml.before-servers``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from kg_fuse import owner_only
from kg_fuse.fs.queries.saved import QueryStore, StoreState

log = logging.getLogger(__name__)

MIGRATED = "queries.toml.before-servers"  # the legacy store, kept once it was migrated
SEEN_FILE = "servers.json"
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class ServerIdentity:
    """A server as the mount keeps queries for it: ``key`` is ``id:<reported id>`` or
    ``url:<normalised address>``; ``label`` says it to people."""

    key: str
    label: str = field(compare=False)  # the address in it may vary: the key decides

    @property
    def folder(self) -> str:
        """Its store's folder: readable, and unique by a digest of the key."""
        readable = re.sub(r"[^A-Za-z0-9]+", "_", self.key).strip("_")[:40]
        digest = hashlib.sha256(self.key.encode()).hexdigest()[:12]
        return f"{readable}-{digest}"


def normalised_url(url: str) -> str:
    """One spelling per address: scheme and host in lower case, the scheme's default
    port left out, no trailing slash."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    port = parts.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def identify(api_url: str, server_id: str | None) -> ServerIdentity:
    """The server at ``api_url`` that reported ``server_id`` (None: it reports none)."""
    address = normalised_url(api_url)
    if server_id is not None:
        return ServerIdentity(f"id:{server_id}", f"server {server_id} (at {address})")
    return ServerIdentity(f"url:{address}",
                          f"{address} (known by its address: it reports no identity)")


@dataclass
class Opened:
    """The queries a mount shows: ``owner``'s, from ``store``. ``provisional``: no
    server answered yet, so ``owner`` is the address, and the first server that
    answers gets them."""

    owner: ServerIdentity
    store: QueryStore | None  # None: its store is unreadable (set aside): none shown
    state: StoreState = field(default_factory=StoreState)
    provisional: bool = False


class ServerStores:
    """One mountpoint's query stores, one per server, for the address it mounts."""

    def __init__(self, directory: Path, api_url: str) -> None:
        self.directory = directory
        self.address = normalised_url(api_url)
        self._api_url = api_url
        self._seen_path = directory / SEEN_FILE

    def identify(self, server_id: str | None) -> ServerIdentity:
        return identify(self._api_url, server_id)

    def store(self, identity: ServerIdentity) -> QueryStore:
        return QueryStore(self.directory / "servers" / identity.folder)

    # -- which server this address was ---------------------------------------------------

    def _seen(self) -> dict[str, dict[str, str]]:
        try:
            raw = json.loads(self._seen_path.read_text(encoding="utf-8"))
            return {a: {"key": str(v["key"]), "label": str(v["label"])}
                    for a, v in raw["addresses"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s is unreadable (%s): which server each address was is "
                        "learned again", self._seen_path, exc)
            return {}

    def last_seen(self) -> ServerIdentity | None:
        """The server this address was when it last answered this mountpoint."""
        entry = self._seen().get(self.address)
        return ServerIdentity(entry["key"], entry["label"]) if entry else None

    def remember(self, identity: ServerIdentity) -> None:
        """This address answered as ``identity`` (blocking: call from a thread). A
        failure to write it is logged, not raised: the next answer says it again."""
        seen = self._seen()
        if seen.get(self.address) == {"key": identity.key, "label": identity.label}:
            return
        seen[self.address] = {"key": identity.key, "label": identity.label}
        tmp = self._seen_path.with_name(f".{SEEN_FILE}.{os.getpid()}.tmp")
        try:
            owner_only.create_dir(self.directory)
            with open(owner_only.open_private(tmp, append=False), "w",
                      encoding="utf-8") as f:
                f.write(json.dumps({"addresses": seen}, indent=1, sort_keys=True) + "\n")
            os.replace(tmp, self._seen_path)
        except OSError as exc:
            log.warning("could not record which server %s is in %s: %s", self.address,
                        self._seen_path, exc)

    # -- the stores ----------------------------------------------------------------------

    def legacy(self) -> QueryStore | None:
        """The single store of an earlier kg-fuse, while it waits to be migrated (or,
        unreadable and set aside, for the user's choice about it)."""
        store = QueryStore(self.directory)
        if store.path.exists() or (store.set_aside()
                                   and not (self.directory / MIGRATED).exists()):
            return store
        return None

    def settled(self) -> QueryStore | None:
        """The store a choice about an unreadable store applies to, before the mount
        knows its server: the earlier kg-fuse's while it waits, else the store of the
        server this address last was (None: no store yet)."""
        legacy = self.legacy()
        if legacy is not None:
            return legacy
        last = self.last_seen()
        return self.store(last) if last is not None else None

    def home_of(self, set_aside: Path) -> QueryStore | None:
        """The server store a file set aside from it belongs to (None: it is no file
        of this mountpoint's servers)."""
        folder = set_aside.absolute().parent
        if folder.parent == (self.directory / "servers").absolute():
            return QueryStore(folder)
        return None

    def open(self, identity: ServerIdentity, provisional: bool = False) -> Opened:
        """``identity``'s queries, the earlier kg-fuse's store migrated to it first.
        Blocking (call from a thread); raises ``StoreCorrupt`` as ``QueryStore.load``
        does."""
        owner_only.create_dir(self.directory / "servers")  # saved search texts: owner only
        store = self.store(identity)
        legacy = self.legacy()
        if legacy is not None and not store.path.exists():
            state = legacy.load()
            store.save(state)
            os.replace(legacy.path, self.directory / MIGRATED)
            log.warning("the %d saved queries of this mountpoint, from before each "
                        "server's were kept apart, now belong to %s; the earlier file is "
                        "kept as %s", len(state.queries), identity.label,
                        self.directory / MIGRATED)
            return Opened(identity, store, state, provisional)
        if legacy is not None:
            log.warning("%s was not migrated: %s has its own saved queries already",
                        legacy.path, identity.label)
        return Opened(identity, store, store.load(), provisional)

    def open_for(self, answered: bool, server_id: str | None) -> Opened:
        """What a mount starts with: the queries of the server that answered (it
        reported ``server_id``); if it did not answer, of the server this address last
        was; if none ever did, the address's, provisionally. Blocking (call from a
        thread)."""
        last = self.last_seen()
        address = self.identify(None)
        if not answered and last is None:
            return self.open(address, provisional=True)
        identity = self.identify(server_id) if answered else last
        assert identity is not None
        self.remember(identity)  # first: a refusal's choices then act on its store
        opened = self.open(identity)
        if last is None and identity != address:
            self._adopt_saved(address, opened)  # made while no server ever answered
        return opened

    def _adopt_saved(self, address: ServerIdentity, opened: Opened) -> None:
        """``adopt``, of the provisional store on disk (an earlier mount's), if any."""
        provisional = self.store(address)
        if not provisional.path.exists():
            return
        made = provisional.load()
        clashes = self.adopt(made, opened)
        assert opened.store is not None  # ``open`` returns one
        opened.store.save(opened.state)
        self.settle_provisional(provisional, StoreState(
            queries={k: made.queries[k] for k in clashes}))
        log.info("%d saved queries made before any server answered at %s now belong to %s",
                 len(made.queries) - len(clashes), self.address, opened.owner.label)

    @staticmethod
    def adopt(provisional: StoreState, opened: Opened) -> list[str]:
        """The first server that answered (``opened``) gets the queries made before it
        did, but for a name it holds already, and what is nested in such a one (it
        would narrow the server's query instead): those keys are returned (they stay in
        the provisional store)."""
        clashes: list[str] = []
        for key, query in sorted(provisional.queries.items(), key=lambda kq: len(kq[1].path)):
            if key in opened.state.queries or query.parent_key in clashes:
                clashes.append(key)
            else:
                opened.state.queries[key] = query
        return clashes

    def settle_provisional(self, store: QueryStore, left: StoreState) -> None:
        """After ``adopt``: the provisional store keeps only what was left (blocking;
        the server's own store holds the rest already)."""
        try:
            if left.queries:
                store.save(left)
                log.warning("%d saved queries made before the server answered clash with "
                            "its own and were not added (kept in %s): %s",
                            len(left.queries), store.path, ", ".join(sorted(left.queries)))
            else:
                store.path.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("could not tidy %s: %s", store.path, exc)
