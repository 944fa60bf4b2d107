"""The FUSE operations: decode names, map inodes and handles to domain objects, map
errors to errnos (``errnos.handler``), set cache flags. What a node is and does lives in
its kind's behaviour (``kinds.BEHAVIOURS``), the queries in ``queries.facade``. The operations
on names are in ``namespace``; these add attributes, extended attributes and files."""

from __future__ import annotations

import logging
import os

import pyfuse3

from kg_fuse.fs.handlers.namespace import NamespaceOperations
from kg_fuse.fs.kernel.errnos import (
    Invalid,
    IsDirectory,
    NoAttribute,
    NotPermitted,
    NotSupported,
    ReadOnly,
    handler,
)
from kg_fuse.fs.kernel.names import decode_name
from kg_fuse.fs.queries.ingest import MAX_PENDING_BYTES
from kg_fuse.fs.tree.behaviour import Behaviour, Caching, writing
from kg_fuse.fs.tree.behaviour_table import behaviour
from kg_fuse.fs.tree.handles import FileHandle

log = logging.getLogger(__name__)

XATTR_NAMESPACE = b"user."  # the only namespace served (others: EOPNOTSUPP)


class KgOperations(NamespaceOperations):
    # -- attributes ---------------------------------------------------------------------

    @handler
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext
                      ) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        await behaviour(node).refresh(self.tree, node)
        return await self._entry(node)

    @handler
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        kind = behaviour(node)
        if (fields.update_mode or fields.update_uid or fields.update_gid) and not kind.chown:
            raise NotPermitted(f"{node.kind.value}: mode and owner are fixed")
        if (fields.update_atime or fields.update_mtime) and not fields.update_size:
            # a truncation's own new mtime comes with its size: the content's change
            await kind.set_times(self.tree, node,
                                 attr.st_mtime_ns if fields.update_mtime else None)
        if fields.update_size:
            await kind.truncate(self.tree, node, attr.st_size, self.handles.file(fh))
        return await self._entry(node)

    @handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        return self.attrs.statfs(len(self.inodes), self.ingest.pending_bytes(),
                                 MAX_PENDING_BYTES)

    @handler
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        node = self._node(inode)
        if not behaviour(node).is_link:
            raise Invalid("not a link")
        return await behaviour(node).content(self.tree, node)

    @handler
    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        node = self._node(inode)
        return await behaviour(node).xattr_names(self.tree, node)

    @handler
    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        if not name.startswith(XATTR_NAMESPACE):
            # ``ls -l`` asks every file for security.selinux and POSIX ACLs (the kernel
            # caches no answer); "not supported" makes it stop asking for this mount
            raise NotSupported(os.fsdecode(name))
        node = self._node(inode)
        value = await behaviour(node).xattr(self.tree, node, name)
        if value is None:
            raise NoAttribute(os.fsdecode(name))
        return value

    # -- files ------------------------------------------------------------------------------

    @handler
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext
                   ) -> pyfuse3.FileInfo:
        node = self._node(inode)
        kind = behaviour(node)
        if kind.instant and not writing(flags):  # the hot path: no awaits
            handle = FileHandle(node, snapshot=kind.now(self.tree, node)[0])
            return self._file_info(self.handles.add(handle), kind)
        if kind.is_dir:
            raise IsDirectory(node.name or node.owner)
        if writing(flags) and not kind.writable:
            raise ReadOnly(f"{node.kind.value} is read-only")
        await kind.refresh(self.tree, node)
        handle = FileHandle(node, opener=ctx.pid)
        await kind.open(self.tree, handle, flags)
        return self._file_info(self.handles.add(handle), kind)

    @staticmethod
    def _file_info(fh: int, kind: Behaviour) -> pyfuse3.FileInfo:
        if kind.caching is Caching.KEEP:  # pages dropped when the bytes change
            return pyfuse3.FileInfo(fh=fh, keep_cache=True)
        if kind.caching is Caching.PAGES:
            return pyfuse3.FileInfo(fh=fh, keep_cache=False)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    @handler
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext
                     ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self._node(parent_inode)
        node = await behaviour(parent).create(self.tree, parent, decode_name(name))
        fh = self.handles.add(FileHandle(node, opener=ctx.pid))
        return pyfuse3.FileInfo(fh=fh, direct_io=True), await self._remember(node)

    @handler
    async def read(self, fh: int, off: int, size: int) -> bytes:
        handle = self.handles.open_file(fh)
        kind = behaviour(handle.node)
        if kind.rereads(handle, off):
            handle.snapshot = await kind.content(self.tree, handle.node)
        return handle.snapshot[off : off + size]

    @handler
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self.handles.open_file(fh)
        return await behaviour(handle.node).write(self.tree, handle, off, buf)

    @handler
    async def flush(self, fh: int) -> None:
        handle = self.handles.file(fh)
        if handle is not None and not behaviour(handle.node).instant:  # results: nothing
            await behaviour(handle.node).flush(self.tree, handle)

    @handler
    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh)
        if isinstance(handle, FileHandle) and not behaviour(handle.node).instant:
            await behaviour(handle.node).release(self.tree, handle)
