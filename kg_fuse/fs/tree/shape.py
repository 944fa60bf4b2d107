"""The shape of the tree, and what every kind of node may be asked.

```
/                          saved global queries + ontology/
├── ontology/<Ontology>/   documents/  ingest/  <scoped query>/
└── <query>/               <Label>.concept.md (best first)  <nested query>/  <link>  .meta/
```

Nodes are identified by (kind, owner, name): the owner is the saved query or the
ontology a node belongs to, as its kind says (``NodeKind.owner``): the query's key
(``"gzip/levels"``) or the ontology's name (``"Text"``).

Behaviour varies by kind as data: each ``NodeKind`` has one ``Behaviour`` (the table is
``kinds.BEHAVIOURS``; directories in ``directories``, files in ``files``). A behaviour
works in a ``Tree``, the domain parts of one mount, and raises the typed errors of
``kernel.errnos``; it knows nothing about the kernel.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from dataclasses import dataclass
from typing import NamedTuple

from kg_fuse.fs.kernel.errnos import (
    BadHandle,
    IsDirectory,
    NoEntry,
    NotDirectory,
    NotPermitted,
    ReadOnly,
)
from kg_fuse.fs.kernel.nodes import InodeTable, Node, NodeKind, Owner
from kg_fuse.fs.kernel.notices import KernelCache
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.facade import QueryService
from kg_fuse.fs.queries.saved import QueryPath, SavedQuery
from kg_fuse.fs.tree.attrs import FILE_TIMEOUT, Attributes
from kg_fuse.fs.tree.control import ScratchFiles
from kg_fuse.fs.tree.handles import FileHandle
from kg_fuse.fs.tree.ingest import IngestBox

log = logging.getLogger(__name__)

DOCUMENTS = "documents"
INGEST = "ingest"


class Entry(NamedTuple):
    """One name in a directory listing, and the identity of the node behind it (a
    tuple: an opendir builds one per result, and a frozen dataclass costs 3x as much)."""

    name: str
    kind: NodeKind
    owner: str
    key: str = ""


def query_path(owner: str) -> QueryPath:
    return tuple(owner.split("/"))


def writing(flags: int) -> bool:
    return (flags & os.O_ACCMODE) != os.O_RDONLY


@dataclass
class Tree:
    """The domain parts of one mount, which every behaviour works with (made by
    ``mount.assemble``). Saved queries, their listings and the server's default are
    reached through ``service`` alone."""

    service: QueryService
    catalog: Catalog
    ingest: IngestBox
    inodes: InodeTable
    kernel: KernelCache
    scratch: ScratchFiles
    attrs: Attributes
    mountpoint: str = ""
    allow_ontology_delete: bool = False
    allow_document_delete: bool = False

    async def settle(self) -> None:
        """After a committed change: wait until the kernel dropped what it cached (names
        that left a listing stop resolving before a write returns)."""
        await self.kernel.flush()

    def query(self, node: Node) -> SavedQuery:
        """The saved query a node belongs to (NoEntry once it was removed)."""
        return self.service.get(query_path(node.owner))

    async def ontology_exists(self, name: str) -> bool:
        return await self.catalog.ontology(name) is not None

    def queries(self, parent: QueryPath) -> list[Entry]:
        return [Entry(q.name, NodeKind.QUERY_DIR, q.key)
                for q in self.service.children(parent)]

    def touch(self, node: Node, part: NodeKind | None = None) -> None:
        """The directory ``node`` (or, with ``part``, one of its query's control files'
        value) changed now; a query's mtimes are kept with its state."""
        now = time.time_ns()
        if node.kind.owner is not Owner.QUERY:
            self.attrs.touch((node.kind.owner, node.owner), now)
        elif not self.service.held.touch(node.owner, now, part):
            log.debug("no query %r to touch", node.owner)

    def mtime_ns(self, node: Node, part: NodeKind | None = None) -> int:
        """When the directory ``node`` (or its query's control file ``part``) changed."""
        if node.kind.owner is Owner.QUERY:
            found = self.service.held.meta_mtime_ns(node.owner, part)
            if found is not None:
                return found
        return self.attrs.meta_mtime_ns((node.kind.owner, node.owner))


class Caching(enum.Enum):
    """What the kernel may keep of an open file's pages."""

    KEEP = "kept across opens; invalidated when the bytes change"  # result files
    PAGES = "cached while open"  # documents: immutable, possibly large
    DIRECT = "not cached: the size changes with writes"  # controls, scratch, ingest


class Behaviour:
    """What one kind of node is and does. The defaults describe a read-only file that
    cannot be removed; each kind overrides what it supports."""

    is_dir = False
    is_link = False
    writable = False  # may be opened for writing (mode 0644)
    chown = False  # chmod/chown accepted (editors and ``cp -p`` set them on their files)
    caching = Caching.DIRECT
    live = False  # every read sees the current bytes, not the snapshot taken at open
    # bytes and mtime known without waiting (``now``): the hot path
    # of result files, whose attributes and opens never await
    instant = False

    # -- reading -------------------------------------------------------------------------

    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        """A directory's entries in listing order (fetching from the server if needed)."""
        raise NotDirectory(node.name or node.owner)

    async def child(self, tree: Tree, node: Node, name: str) -> Node:
        """The node for ``name`` in this directory."""
        for entry in await self.children(tree, node):
            if entry.name == name:
                return tree.inodes.ensure(entry.kind, entry.owner, entry.key)
        raise NoEntry(name)

    async def content(self, tree: Tree, node: Node) -> bytes:
        raise IsDirectory(node.name or node.owner)

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        return tree.mtime_ns(node)

    def entry_timeout(self, tree: Tree, node: Node) -> float:
        """How long the kernel may cache the name and attributes."""
        return FILE_TIMEOUT

    async def refresh(self, tree: Tree, node: Node) -> None:
        """Bring what the node shows up to date before it is looked at."""

    def now(self, tree: Tree, node: Node) -> tuple[bytes, int]:
        """The bytes and mtime, without awaiting (only for ``instant`` kinds)."""
        raise NotImplementedError

    def rereads(self, handle: FileHandle, offset: int) -> bool:
        """Whether a read at ``offset`` renders the bytes anew instead of serving the
        handle's snapshot."""
        return handle.snapshot is None or self.live

    async def xattr_names(self, tree: Tree, node: Node) -> list[bytes]:
        return []

    async def xattr(self, tree: Tree, node: Node, name: bytes) -> bytes | None:
        return None

    # -- changing a directory ------------------------------------------------------------

    async def mkdir(self, tree: Tree, parent: Node, name: str) -> Node:
        raise NotPermitted(f"no directories can be made in {parent.kind.value}")

    async def create(self, tree: Tree, parent: Node, name: str) -> Node:
        raise NotPermitted(f"no files can be made in {parent.kind.value}")

    async def symlink(self, tree: Tree, parent: Node, name: str, target: str) -> Node:
        raise NotPermitted(f"no links can be made in {parent.kind.value}")

    async def rename(self, tree: Tree, parent: Node, old: str, new_parent: Node,
                     new: str) -> None:
        raise NotPermitted(f"nothing can be renamed in {parent.kind.value}")

    # -- removing this node: True when it is gone, False when it stays -------------------

    async def rmdir(self, tree: Tree, node: Node) -> bool:
        if not self.is_dir:
            raise NotDirectory(node.name)
        raise NotPermitted(f"{node.kind.value} cannot be removed")

    async def unlink(self, tree: Tree, node: Node) -> bool:
        if self.is_dir:
            raise IsDirectory(node.name or node.owner)
        raise NotPermitted(f"{node.kind.value} cannot be removed")

    # -- open files ----------------------------------------------------------------------

    async def open(self, tree: Tree, handle: FileHandle, flags: int) -> None:
        """Prepare a handle (the content as of open; a write session)."""
        handle.snapshot = await self.content(tree, handle.node)

    async def truncate(self, tree: Tree, node: Node, size: int,
                       handle: FileHandle | None) -> None:
        raise ReadOnly(f"{node.kind.value} is read-only")

    async def set_times(self, tree: Tree, node: Node, mtime_ns: int | None) -> None:
        """``touch``, ``cp -p``: keep ``mtime_ns`` (None: the access time alone, which is
        not kept). Refused where the mtime says when the content changed, as it does for
        every directory and generated file: ``touch`` would exit 0 and change nothing."""
        raise NotPermitted(f"{node.kind.value}: its time is when its content changed")

    async def write(self, tree: Tree, handle: FileHandle, offset: int, data: bytes) -> int:
        raise BadHandle(f"{handle.node.kind.value} is not open for writing")

    async def flush(self, tree: Tree, handle: FileHandle) -> None:
        """``close()`` waits for this: what must be durable when it returns."""

    async def release(self, tree: Tree, handle: FileHandle) -> None:
        """The last descriptor of the handle closed."""
