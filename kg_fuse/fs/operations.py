"""The FUSE operations: decode names, map inodes and handles to domain objects, map
errors to errnos, set cache flags. Everything else lives in the service below."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from dataclasses import dataclass, field

import pyfuse3

from kg_fuse.client.errors import KgError
from kg_fuse.fs.attrs import Attributes
from kg_fuse.fs.control import ScratchFiles, WriteSession
from kg_fuse.fs.errors import handler
from kg_fuse.fs.names import META_DIR, InvalidName, decode_name
from kg_fuse.fs.nodes import InodeTable, Node, NodeKind
from kg_fuse.fs.queries import SavedQuery
from kg_fuse.fs.render import query_toml, status_file, threshold_file
from kg_fuse.fs.results import ResultSet
from kg_fuse.fs.service import QueryNotFound, QueryService
from kg_fuse.fs.threshold import parse_threshold_file

log = logging.getLogger(__name__)

META_FILES = {
    "threshold": NodeKind.THRESHOLD_FILE,
    "query.toml": NodeKind.QUERY_TOML_FILE,
    "status": NodeKind.STATUS_FILE,
}
GENERATED = (NodeKind.THRESHOLD_FILE, NodeKind.QUERY_TOML_FILE, NodeKind.STATUS_FILE)
READ_ONLY = (NodeKind.RESULT_FILE, NodeKind.QUERY_TOML_FILE, NodeKind.STATUS_FILE)


@dataclass
class FileHandle:
    node: Node
    session: WriteSession | None = None
    snapshot: bytes | None = None


@dataclass
class DirHandle:
    entries: list[tuple[str, NodeKind, str, str]] = field(default_factory=list)


def _enoent() -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(errno.ENOENT)


class KgOperations(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, service: QueryService) -> None:
        super().__init__()
        self.service = service
        self.inodes = InodeTable()
        self.attrs = Attributes(started_ns=time.time_ns())
        self.scratch = ScratchFiles()
        self._handles: dict[int, FileHandle | DirHandle] = {}
        self._fetch_errors: dict[str, str] = {}
        self._next_fh = 1
        service.results_cache.on_refresh = self._results_refreshed

    # -- helpers ------------------------------------------------------------------------

    def _node(self, inode: int) -> Node:
        node = self.inodes.get(inode)
        if node is None:
            raise _enoent()
        return node

    def _query(self, node: Node) -> SavedQuery:
        try:
            return self.service.get(node.query)
        except QueryNotFound:
            raise _enoent() from None

    def _new_handle(self, handle: FileHandle | DirHandle) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = handle
        return fh

    def _file_handle(self, fh: int) -> FileHandle:
        handle = self._handles.get(fh)
        if not isinstance(handle, FileHandle):
            raise pyfuse3.FUSEError(errno.EBADF)
        return handle

    def _meta_body(self, node: Node) -> bytes:
        query = self._query(node)
        effective = self.service.effective(query)
        default = self.service.server_default.value
        if node.kind is NodeKind.THRESHOLD_FILE:
            return threshold_file(query, effective, default)
        if node.kind is NodeKind.STATUS_FILE:
            problem = self._fetch_errors.get(query.name) or self.service.server_error
            return status_file(query, effective, default,
                               self.service.results_cache.cached(query.name), problem)
        return query_toml(query, effective, default)

    def _body(self, node: Node) -> bytes:
        """Current content of a file node (last known for a result that left the list)."""
        if node.kind in GENERATED:
            return self._meta_body(node)
        if node.kind is NodeKind.SCRATCH_FILE:
            content = self.scratch.get(node.query, node.name)
            if content is None:
                raise _enoent()
            return bytes(content)
        result_set = self.service.results_cache.cached(node.query)
        found = result_set.by_concept(node.name) if result_set else None
        if found is not None:
            node.last_body, node.last_mtime_ns = found.body, found.mtime_ns
        return node.last_body

    def _entry(self, node: Node) -> pyfuse3.EntryAttributes:
        kind = node.kind
        if kind is NodeKind.ROOT:
            return self.attrs.directory(node.inode, self.attrs.started_ns)
        if kind.is_dir:
            query = self.service.state.queries.get(node.query)
            return self.attrs.directory(node.inode, self.attrs.query_mtime_ns(query))
        body = self._body(node)
        if kind is NodeKind.RESULT_FILE:
            return self.attrs.file(node.inode, len(body), node.last_mtime_ns, writable=False)
        mtime = self.attrs.meta_mtime_ns(node.query)
        return self.attrs.file(node.inode, len(body), mtime,
                               writable=kind not in READ_ONLY)

    def _remember(self, node: Node) -> pyfuse3.EntryAttributes:
        entry = self._entry(node)
        node.lookups += 1
        return entry

    def _results_refreshed(self, query: str, old: ResultSet | None, new: ResultSet) -> None:
        """Tell the kernel about names that left the listing and bodies that changed."""
        if old is None:
            return
        directory = self.inodes.find(NodeKind.QUERY_DIR, query)
        for name, previous in old.files.items():
            current = new.files.get(name)
            if current is None and directory is not None:
                pyfuse3.invalidate_entry_async(directory.inode, os.fsencode(name),
                                               ignore_enoent=True)
            elif current is not None and current.body != previous.body:
                node = self.inodes.find(NodeKind.RESULT_FILE, query, current.concept_id)
                if node is not None:
                    with contextlib.suppress(OSError):
                        pyfuse3.invalidate_inode(node.inode)

    async def _set_threshold(self, query: str, value: float | None) -> None:
        await self.service.set_threshold(query, value)
        self.attrs.touch_query(query, time.time_ns())

    async def _meta_refresh(self, node: Node) -> None:
        """Before showing a .meta file, learn the server default if the cache is stale;
        before showing the status, try to fetch the results it describes."""
        if node.kind not in GENERATED:
            return
        query = self._query(node)
        await self.service.current_default(query)
        if node.kind is NodeKind.STATUS_FILE:
            try:
                await self.service.results(query)
                self._fetch_errors.pop(query.name, None)
            except KgError as exc:
                self._fetch_errors[query.name] = str(exc)

    async def _children(self, node: Node) -> list[tuple[str, NodeKind, str, str]]:
        """(name, kind, query, key name) of a directory's entries, in listing order."""
        if node.kind is NodeKind.ROOT:
            return [(q, NodeKind.QUERY_DIR, q, "") for q in self.service.names()]
        query = self._query(node)
        if node.kind is NodeKind.META_DIR:
            entries = [(n, k, query.name, "") for n, k in META_FILES.items()]
            return entries + [(n, NodeKind.SCRATCH_FILE, query.name, n)
                              for n in self.scratch.names(query.name)]
        result_set = await self.service.results(query)
        return [(META_DIR, NodeKind.META_DIR, query.name, "")] + [
            (f.name, NodeKind.RESULT_FILE, query.name, f.concept_id)
            for f in result_set.files.values()
        ]

    async def _child(self, parent: Node, name: str) -> Node:
        if parent.kind is NodeKind.ROOT:
            if name not in self.service.state.queries:
                raise _enoent()
            return self.inodes.ensure(NodeKind.QUERY_DIR, name)
        query = self._query(parent)
        if parent.kind is NodeKind.META_DIR:
            if name in META_FILES:
                return self.inodes.ensure(META_FILES[name], query.name)
            if self.scratch.get(query.name, name) is None:
                raise _enoent()
            return self.inodes.ensure(NodeKind.SCRATCH_FILE, query.name, name)
        if parent.kind is NodeKind.QUERY_DIR:
            if name == META_DIR:
                return self.inodes.ensure(NodeKind.META_DIR, query.name)
            found = (await self.service.results(query)).files.get(name)
            if found is not None:
                return self.inodes.ensure(NodeKind.RESULT_FILE, query.name, found.concept_id)
        raise _enoent()

    # -- lookups and attributes --------------------------------------------------------

    @handler
    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
                     ) -> pyfuse3.EntryAttributes:
        try:
            child_name = decode_name(name)
        except InvalidName:  # such a name can never exist here
            raise _enoent() from None
        node = await self._child(self._node(parent_inode), child_name)
        await self._meta_refresh(node)
        return self._remember(node)

    @handler
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext
                      ) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        await self._meta_refresh(node)
        return self._entry(node)

    def forget(self, inode_list: list[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            self.inodes.forget(inode, count)

    @handler
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        changes_owner = fields.update_mode or fields.update_uid or fields.update_gid
        if changes_owner and node.kind is not NodeKind.SCRATCH_FILE:
            raise pyfuse3.FUSEError(errno.EPERM)
        if fields.update_size:
            await self._truncate(node, attr.st_size, fh)
        return self._entry(node)

    async def _truncate(self, node: Node, size: int, fh: int | None) -> None:
        if node.kind is NodeKind.SCRATCH_FILE:
            self.scratch.resize(node.query, node.name, size)
        elif node.kind is NodeKind.THRESHOLD_FILE:
            if size != 0:
                raise pyfuse3.FUSEError(errno.EINVAL)
            handle = self._handles.get(fh) if fh is not None else None
            if isinstance(handle, FileHandle) and handle.session is not None:
                handle.session.truncate()
            else:  # truncate(1) on the path: an empty file means inherit
                await self._set_threshold(node.query, None)
        else:
            raise pyfuse3.FUSEError(errno.EACCES)

    @handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        return self.attrs.statfs(len(self.inodes))

    # -- directories ----------------------------------------------------------------------

    @handler
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self._node(inode)
        if not node.kind.is_dir:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        return self._new_handle(DirHandle(await self._children(node)))

    @handler
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        handle = self._handles.get(fh)
        if not isinstance(handle, DirHandle):
            raise pyfuse3.FUSEError(errno.EBADF)
        for index in range(start_id, len(handle.entries)):
            name, kind, query, key = handle.entries[index]
            node = self.inodes.ensure(kind, query, key)
            if not pyfuse3.readdir_reply(token, os.fsencode(name), self._entry(node), index + 1):
                return
            node.lookups += 1

    @handler
    async def releasedir(self, fh: int) -> None:
        self._handles.pop(fh, None)

    @handler
    async def mkdir(self, parent_inode: int, name: bytes, mode: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if self._node(parent_inode).kind is not NodeKind.ROOT:
            raise pyfuse3.FUSEError(errno.EPERM)
        query = await self.service.create(decode_name(name))
        return self._remember(self.inodes.ensure(NodeKind.QUERY_DIR, query.name))

    @handler
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        if self._node(parent_inode).kind is not NodeKind.ROOT:
            raise pyfuse3.FUSEError(errno.EPERM)
        query_name = decode_name(name)
        await self.service.remove(query_name)
        self.scratch.drop_query(query_name)
        self.inodes.detach_query(query_name)

    # -- files ------------------------------------------------------------------------------

    @handler
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext
                   ) -> pyfuse3.FileInfo:
        node = self._node(inode)
        writing = (flags & os.O_ACCMODE) != os.O_RDONLY
        if node.kind.is_dir:
            raise pyfuse3.FUSEError(errno.EISDIR)
        if writing and node.kind in READ_ONLY:
            raise pyfuse3.FUSEError(errno.EACCES)
        await self._meta_refresh(node)
        handle = FileHandle(node, snapshot=self._body(node))
        if node.kind is NodeKind.SCRATCH_FILE and flags & os.O_TRUNC:
            self.scratch.resize(node.query, node.name, 0)
        if writing and node.kind is NodeKind.THRESHOLD_FILE:
            handle.session = WriteSession.begin(handle.snapshot or b"", flags)
        fh = self._new_handle(handle)
        if node.kind is NodeKind.RESULT_FILE:
            return pyfuse3.FileInfo(fh=fh, keep_cache=False)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    @handler
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext
                     ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self._node(parent_inode)
        file_name = decode_name(name)
        if parent.kind is not NodeKind.META_DIR or file_name in META_FILES:
            raise pyfuse3.FUSEError(errno.EPERM)
        self.scratch.create(self._query(parent).name, file_name)
        node = self.inodes.ensure(NodeKind.SCRATCH_FILE, parent.query, file_name)
        fh = self._new_handle(FileHandle(node))
        return pyfuse3.FileInfo(fh=fh, direct_io=True), self._remember(node)

    @handler
    async def read(self, fh: int, off: int, size: int) -> bytes:
        handle = self._file_handle(fh)
        if handle.node.kind is NodeKind.SCRATCH_FILE or handle.snapshot is None:
            handle.snapshot = self._body(handle.node)
        return handle.snapshot[off : off + size]

    @handler
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self._file_handle(fh)
        node = handle.node
        if node.kind is NodeKind.SCRATCH_FILE:
            self.scratch.write(node.query, node.name, off, buf)
            return len(buf)
        if handle.session is None:
            raise pyfuse3.FUSEError(errno.EBADF)
        content = handle.session.candidate(off, buf)
        value = parse_threshold_file(content)  # InvalidThreshold -> EINVAL, nothing kept
        await self._set_threshold(node.query, value)
        handle.session.accept(content)
        handle.snapshot = None
        return len(buf)

    @handler
    async def flush(self, fh: int) -> None:
        return None

    @handler
    async def release(self, fh: int) -> None:
        handle = self._handles.pop(fh, None)
        session = handle.session if isinstance(handle, FileHandle) else None
        if session is not None and session.commits_empty_on_release:
            await self._set_threshold(handle.node.query, None)

    @handler
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._node(parent_inode)
        file_name = decode_name(name)
        if parent.kind is not NodeKind.META_DIR or file_name in META_FILES:
            raise pyfuse3.FUSEError(errno.EPERM)
        if self.scratch.pop(parent.query, file_name) is None:
            raise _enoent()
        self.inodes.detach(NodeKind.SCRATCH_FILE, parent.query, file_name)

    @handler
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        parent = self._node(parent_inode_old)
        old, new = decode_name(name_old), decode_name(name_new)
        if (parent_inode_old != parent_inode_new or parent.kind is not NodeKind.META_DIR
                or old in META_FILES or flags):
            raise pyfuse3.FUSEError(errno.EPERM)
        content = self.scratch.get(parent.query, old)
        if content is None:
            raise _enoent()
        if new == "threshold":  # sed -i and friends: validate, commit, drop the scratch
            await self._set_threshold(parent.query, parse_threshold_file(bytes(content)))
            self.scratch.pop(parent.query, old)
            new_key = (NodeKind.THRESHOLD_FILE, parent.query, "")
        elif new in META_FILES:
            raise pyfuse3.FUSEError(errno.EPERM)
        else:
            self.scratch.move(parent.query, old, new)
            new_key = (NodeKind.SCRATCH_FILE, parent.query, new)
        self.inodes.move((NodeKind.SCRATCH_FILE, parent.query, old), new_key)

