"""What every kind of node may be asked: the ``Behaviour`` interface.

```
/                          saved global queries + ontology/
├── ontology/<Ontology>/   documents/  ingest/  <scoped query>/
└── <query>/               <Label>.concept.md (best first)  <nested query>/  <link>  .meta/
```

Behaviour varies by kind as data: each ``NodeKind`` has one ``Behaviour`` (the table is
``behaviour_table.BEHAVIOURS``; directories in ``directories``, files in ``files``, the
``.meta`` directory and its files in ``meta/``). A behaviour works in a ``Tree``
(``mount_tree``), the domain parts of one mount, and raises the typed errors of
``kernel.errnos``; it knows nothing about the kernel.
"""

from __future__ import annotations

import enum
import os

from kg_fuse.fs.kernel.errnos import (
    BadHandle,
    IsDirectory,
    NoEntry,
    NotDirectory,
    NotPermitted,
    ReadOnly,
)
from kg_fuse.fs.kernel.nodes import Node
from kg_fuse.fs.tree.attrs import FILE_TIMEOUT
from kg_fuse.fs.tree.handles import FileHandle
from kg_fuse.fs.tree.mount_tree import Entry, Tree


def writing(flags: int) -> bool:
    return (flags & os.O_ACCMODE) != os.O_RDONLY


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
