"""The FUSE operations on names: lookups and forgetting, listing directories, making,
linking, removing and renaming entries. The operations on attributes and file content
extend these (``operations``)."""

from __future__ import annotations

import logging
import os

import pyfuse3

from kg_fuse.fs.kernel.errnos import (
    FsError,
    Invalid,
    InvalidName,
    NameTooLong,
    NoEntry,
    NotDirectory,
    NotPermitted,
    handler,
)
from kg_fuse.fs.kernel.names import PATH_MAX, decode_name
from kg_fuse.fs.kernel.nodes import Node, NodeKind
from kg_fuse.fs.kernel.notices import KernelCache
from kg_fuse.fs.tree.behaviour import Behaviour
from kg_fuse.fs.tree.behaviour_table import BEHAVIOURS, behaviour
from kg_fuse.fs.tree.handles import DirHandle, HandleTable
from kg_fuse.fs.tree.mount_tree import Entry, Tree
from kg_fuse.memory import give_memory_back

log = logging.getLogger(__name__)

DOTS = (".", "..")
TRIM_AFTER = 5000  # inodes forgotten between two heap trims


class NamespaceOperations(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, tree: Tree, kernel: KernelCache) -> None:
        """The parts come made and wired (``mount.assemble``)."""
        super().__init__()
        self.tree = tree
        self.service, self.catalog, self.ingest = tree.service, tree.catalog, tree.ingest
        self.inodes, self.attrs = tree.inodes, tree.attrs
        self.handles = HandleTable()
        self.kernel = kernel
        self._forgotten = 0

    # -- helpers ------------------------------------------------------------------------

    def _node(self, inode: int) -> Node:
        node = self.inodes.get(inode)
        if node is None:
            raise NoEntry(f"inode {inode}")
        return node

    def _instant_entry(self, node: Node, kind: Behaviour) -> pyfuse3.EntryAttributes:
        """Attributes without awaiting (result files: the hot path)."""
        body, mtime_ns = kind.now(self.tree, node)
        return self.attrs.file(node.inode, len(body), mtime_ns,
                               writable=kind.writable,
                               timeout=kind.entry_timeout(self.tree, node))

    async def _entry(self, node: Node) -> pyfuse3.EntryAttributes:
        kind = behaviour(node)
        if kind.instant:
            return self._instant_entry(node, kind)
        if kind.is_dir:
            return self.attrs.directory(node.inode, self.tree.mtime_ns(node))
        size = len(await kind.content(self.tree, node))
        if kind.is_link:
            return self.attrs.link(node.inode, size)
        return self.attrs.file(node.inode, size, await kind.mtime_ns(self.tree, node),
                               writable=kind.writable,
                               timeout=kind.entry_timeout(self.tree, node))

    async def _remember(self, node: Node) -> pyfuse3.EntryAttributes:
        entry = await self._entry(node)
        node.lookups += 1
        return entry


    # -- names ---------------------------------------------------------------------------

    @handler
    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
                     ) -> pyfuse3.EntryAttributes:
        try:
            child_name = decode_name(name)
        except NameTooLong:
            raise
        except InvalidName:  # such a name can never exist here
            raise NoEntry(os.fsdecode(name)) from None
        parent = self._node(parent_inode)
        node = await behaviour(parent).child(self.tree, parent, child_name)
        await behaviour(node).refresh(self.tree, node)
        return await self._remember(node)

    def forget(self, inode_list: list[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            node = self.inodes.get(inode)
            self.inodes.forget(inode, count)
            if node is not None and node.kind is NodeKind.QUERY_DIR and node.attached \
                    and self.inodes.get(inode) is None:  # nothing below it is held
                self.service.held.forgotten(node.owner)
        self._forgotten += len(inode_list)
        if self._forgotten >= TRIM_AFTER:
            self._forgotten = 0
            give_memory_back()

    # -- directories ----------------------------------------------------------------------

    @handler
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self._node(inode)
        kind = behaviour(node)
        if not kind.is_dir:
            raise NotDirectory(node.name)
        # '.' and '..' as ls -a expects; the kernel answers their lookups itself (and does
        # not count them), so both carry this directory's identity
        dots = [Entry(name, node.kind, node.owner, node.name) for name in DOTS]
        handle = DirHandle(dots + await kind.children(self.tree, node))
        await self.kernel.flush()  # a refetch changed names: tell the kernel first
        return self.handles.add(handle)

    @handler
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        entries = self.handles.directory(fh).entries
        for index in range(start_id, len(entries)):
            entry = entries[index]
            node = self.inodes.ensure(entry.kind, entry.owner, entry.key)
            kind = BEHAVIOURS[entry.kind]
            if kind.instant:  # most entries: no awaits
                attributes = self._instant_entry(node, kind)
            else:
                try:
                    attributes = await self._entry(node)
                except FsError:  # gone since opendir: skip it, keep the offsets
                    continue
            if not pyfuse3.readdir_reply(token, os.fsencode(entry.name), attributes,
                                         index + 1):
                return
            if entry.name not in DOTS:
                node.lookups += 1

    @handler
    async def releasedir(self, fh: int) -> None:
        self.handles.pop(fh)

    @handler
    async def mkdir(self, parent_inode: int, name: bytes, mode: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent = self._node(parent_inode)
        node = await behaviour(parent).mkdir(self.tree, parent, decode_name(name))
        return await self._remember(node)

    @handler
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._node(parent_inode)
        child = await behaviour(parent).child(self.tree, parent, decode_name(name))
        if await behaviour(child).rmdir(self.tree, child):
            self.inodes.detach_owner(child.kind.owner, child.owner)
            self.tree.touch(parent)

    @handler
    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent = self._node(parent_inode)
        node = await behaviour(parent).symlink(self.tree, parent, decode_name(name),
                                               decode_name(target, PATH_MAX))
        return await self._remember(node)

    @handler
    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        """FIFOs, sockets and devices have no meaning here (``mkfifo``: EPERM)."""
        decode_name(name)
        raise NotPermitted("no special files")

    @handler
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._node(parent_inode)
        child = await behaviour(parent).child(self.tree, parent, decode_name(name))
        if await behaviour(child).unlink(self.tree, child):
            self.inodes.detach(child.kind, child.owner, child.name)
            self.tree.touch(parent)

    @handler
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        old_parent, new_parent = self._node(parent_inode_old), self._node(parent_inode_new)
        old, new = decode_name(name_old), decode_name(name_new)
        if flags:
            raise Invalid("RENAME_EXCHANGE and RENAME_NOREPLACE are not supported")
        await behaviour(old_parent).rename(self.tree, old_parent, old, new_parent, new)
