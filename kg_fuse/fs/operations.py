"""The FUSE operations: decode names, map inodes and handles to domain objects, map
errors to errnos, set cache flags. The tree's shape lives in ``tree``; the queries in
``service``; control-file semantics in ``meta`` and ``control``."""

from __future__ import annotations

import errno
import logging
import os
import time

import pyfuse3

from kg_fuse.fs.attrs import Attributes
from kg_fuse.fs.catalog import Catalog, ontology_file_name
from kg_fuse.fs.control import ScratchFiles, WriteSession
from kg_fuse.fs.errors import handler
from kg_fuse.fs.handles import DirHandle, FileHandle, HandleTable
from kg_fuse.fs.ingest import IngestBox
from kg_fuse.fs.kernel import TRIM_AFTER, KernelCache, give_memory_back
from kg_fuse.fs.links import resolve_link_target
from kg_fuse.fs.meta import CONTROL_BY_KIND, CONTROLS, Control, control_mtime_key
from kg_fuse.fs.names import META_DIR, PATH_MAX, InvalidName, NameTooLong, decode_name
from kg_fuse.fs.nodes import InodeTable, Node, NodeKind
from kg_fuse.fs.queries import ONTOLOGY_DIR, Link
from kg_fuse.fs.results import ResultSet
from kg_fuse.fs.service import QueryService
from kg_fuse.fs.tree import DOCUMENTS, INGEST, Entry, Tree, enoent, ontology_of, query_path

log = logging.getLogger(__name__)

READ_ONLY = frozenset({NodeKind.RESULT_FILE, NodeKind.DOCUMENT_FILE, NodeKind.JOB_FILE,
                       NodeKind.STATUS_FILE, NodeKind.QUERY_TOML_FILE})
# Files a saved query generates. ``rm`` of one is accepted and changes nothing, so that
# ``rm -r QUERY`` removes a query quietly, the way users remove a directory they made.
VIEWS = frozenset({NodeKind.RESULT_FILE, *CONTROL_BY_KIND})
DOTS = (".", "..")
XATTR_SCORE = b"user.kg.score"
XATTR_CONCEPT = b"user.kg.concept_id"
XATTR_NAMESPACE = b"user."  # the only namespace served (others: EOPNOTSUPP)
XATTR_WARNINGS = b"user.kg.warnings"  # a document's status: one warning per line


def _eperm() -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(errno.EPERM)


class KgOperations(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, service: QueryService, catalog: Catalog, ingest: IngestBox,
                 mountpoint: str = "", allow_ontology_delete: bool = False,
                 allow_document_delete: bool = False) -> None:
        super().__init__()
        self.service = service
        self.catalog = catalog
        self.ingest = ingest
        self.mountpoint = mountpoint
        self.allow_ontology_delete = allow_ontology_delete
        self.allow_document_delete = allow_document_delete
        self.inodes = InodeTable()
        self.scratch = ScratchFiles(service.scratch)
        self.tree = Tree(service, catalog, ingest, self.inodes, self.scratch)
        self.attrs = Attributes(started_ns=time.time_ns())
        self.handles = HandleTable()
        self.kernel = KernelCache()
        self._forgotten = 0
        service.listen(on_refresh=self._results_refreshed, on_stale=self._results_stale)

    # -- helpers ------------------------------------------------------------------------

    def _node(self, inode: int) -> Node:
        node = self.inodes.get(inode)
        if node is None:
            raise enoent()
        return node

    def _result_entry(self, node: Node) -> pyfuse3.EntryAttributes:
        body = self.tree.result_body(node)
        return self.attrs.file(node.inode, len(body), node.last_mtime_ns, writable=False,
                               timeout=self.service.ttl(node.owner))

    async def _entry(self, node: Node) -> pyfuse3.EntryAttributes:
        kind = node.kind
        if kind is NodeKind.RESULT_FILE:  # the hot path: no awaits
            return self._result_entry(node)
        if kind.is_dir:
            return self.attrs.directory(node.inode, self._mtime_ns(node.owner))
        body = await self.tree.content(node)
        if kind is NodeKind.LINK:
            return self.attrs.link(node.inode, len(body))
        writable = kind not in READ_ONLY
        control = CONTROL_BY_KIND.get(kind)
        mtime_key = control_mtime_key(node.owner, kind) if control and control.writable \
            else node.owner
        mtime_ns = await self.tree.mtime_ns(node) or self._mtime_ns(mtime_key)
        return self.attrs.file(node.inode, len(body), mtime_ns, writable=writable)

    async def _remember(self, node: Node) -> pyfuse3.EntryAttributes:
        entry = await self._entry(node)
        node.lookups += 1
        return entry

    def _results_refreshed(self, key: str, old: ResultSet | None, new: ResultSet) -> None:
        """A listing was fetched again: the kernel forgets the names that left it and the
        pages and sizes of results whose bytes changed (sent a moment later: this may run
        inside a ``lookup``, while the kernel holds the directory's lock)."""
        directory = self.inodes.find(NodeKind.QUERY_DIR, key)
        if old is not None and directory is not None:
            for name in old.files.keys() - new.files.keys():
                self.kernel.forget_name(directory.inode, name)
        for found in new.files.values():
            node = self.inodes.find(NodeKind.RESULT_FILE, key, found.concept_id)
            if node is not None and node.last_body and node.last_body != found.body:
                self.kernel.forget_content(node.inode)
        self.kernel.flush_soon()

    def _results_stale(self, key: str, result_set: ResultSet) -> None:
        """A listing may have changed (settings, server content or default): the kernel
        forgets its names, so the next path walk asks ``lookup``, which refetches."""
        directory = self.inodes.find(NodeKind.QUERY_DIR, key)
        if directory is not None:
            for name in result_set.files:
                self.kernel.forget_name(directory.inode, name)
        self.kernel.flush_soon()

    def _touch(self, owner: str) -> None:
        now = time.time_ns()
        if not self.service.touch(owner, now):  # a query's are kept with its state
            self.attrs.touch(owner, now)

    def _mtime_ns(self, owner: str) -> int:
        return self.service.meta_mtime_ns(owner) or self.attrs.meta_mtime_ns(owner)

    async def _commit(self, control: Control, owner: str, value: object) -> None:
        """Set a control's value, once; an unchanged value changes nothing (no refresh,
        no mtime: vim's "changed since reading" check compares mtimes)."""
        assert control.commit is not None and control.current is not None
        path = query_path(owner)
        if control.current(self.service.get(path)) == value:
            return
        self._touch(owner)
        self._touch(control_mtime_key(owner, control.kind))
        await control.commit(self.service, path, value)  # state changes before any await
        await self.kernel.flush()  # names that left stop resolving before we return

    # -- lookups and attributes --------------------------------------------------------

    @handler
    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
                     ) -> pyfuse3.EntryAttributes:
        try:
            child_name = decode_name(name)
        except NameTooLong:
            raise
        except InvalidName:  # such a name can never exist here
            raise enoent() from None
        node = await self.tree.child(self._node(parent_inode), child_name)
        await self.tree.refresh_meta(node)
        return await self._remember(node)

    @handler
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext
                      ) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        await self.tree.refresh_meta(node)
        return await self._entry(node)

    def forget(self, inode_list: list[tuple[int, int]]) -> None:
        for inode, count in inode_list:
            node = self.inodes.get(inode)
            self.inodes.forget(inode, count)
            if node is not None and node.kind is NodeKind.QUERY_DIR and node.attached \
                    and self.inodes.get(inode) is None:  # nothing below it is held
                self.service.forgotten(node.owner)
        self._forgotten += len(inode_list)
        if self._forgotten >= TRIM_AFTER:
            self._forgotten = 0
            give_memory_back()

    @handler
    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes,
                      fields: pyfuse3.SetattrFields, fh: int | None,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        node = self._node(inode)
        changes_owner = fields.update_mode or fields.update_uid or fields.update_gid
        if changes_owner and node.kind not in (NodeKind.SCRATCH_FILE, NodeKind.INGEST_FILE):
            raise _eperm()
        if fields.update_size:
            await self._truncate(node, attr.st_size, fh)
        return await self._entry(node)

    async def _truncate(self, node: Node, size: int, fh: int | None) -> None:
        control = CONTROL_BY_KIND.get(node.kind)
        if node.kind is NodeKind.SCRATCH_FILE:
            self.scratch.resize(node.owner, node.name, size)
        elif node.kind is NodeKind.INGEST_FILE:
            pending = self.ingest.get(ontology_of(node.owner), node.name)
            if pending is None:
                raise enoent()
            self.ingest.truncate(pending, size)
        elif control is not None and control.writable:
            if size != 0:
                raise pyfuse3.FUSEError(errno.EINVAL)
            handle = self.handles.file(fh)
            if handle is not None and handle.session is not None:
                handle.session.truncate()  # committed with the session, at flush
            else:  # truncate(1) on the path: an empty file, durable on return
                assert control.parse is not None
                await self._commit(control, node.owner, control.parse(b""))
        else:
            raise pyfuse3.FUSEError(errno.EACCES)

    @handler
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        return self.attrs.statfs(len(self.inodes))

    @handler
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        node = self._node(inode)
        if node.kind is not NodeKind.LINK:
            raise pyfuse3.FUSEError(errno.EINVAL)
        return await self.tree.content(node)

    @handler
    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        node = self._node(inode)
        if node.kind is NodeKind.DOCUMENT_FILE:
            entry = await self.tree.document(node)
            return [XATTR_WARNINGS] if entry is not None and entry.warnings else []
        return [XATTR_SCORE, XATTR_CONCEPT] if node.kind is NodeKind.RESULT_FILE else []

    @handler
    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        if not name.startswith(XATTR_NAMESPACE):
            # ``ls -l`` asks every file for security.selinux and POSIX ACLs (the kernel
            # caches no answer); "not supported" makes it stop asking for this mount
            raise pyfuse3.FUSEError(errno.EOPNOTSUPP)
        node = self._node(inode)
        if node.kind is NodeKind.RESULT_FILE:
            if name == XATTR_CONCEPT:
                return node.name.encode()
            result_set = self.service.listing(node.owner)
            found = result_set.by_concept.get(node.name) if result_set else None
            if name == XATTR_SCORE and found is not None:
                return f"{found.score:.6f}".encode()
        elif node.kind is NodeKind.DOCUMENT_FILE and name == XATTR_WARNINGS:
            entry = await self.tree.document(node)
            if entry is not None and entry.warnings:
                return "\n".join(entry.warnings).encode()
        raise pyfuse3.FUSEError(errno.ENODATA)

    # -- directories ----------------------------------------------------------------------

    @handler
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        node = self._node(inode)
        if not node.kind.is_dir:
            raise pyfuse3.FUSEError(errno.ENOTDIR)
        # '.' and '..' as ls -a expects; the kernel answers their lookups itself (and does
        # not count them), so both carry this directory's identity
        dots = [Entry(name, node.kind, node.owner, node.name) for name in DOTS]
        handle = DirHandle(dots + await self.tree.children(node))
        await self.kernel.flush()  # a refetch changed names: tell the kernel first
        return self.handles.add(handle)

    @handler
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        entries = self.handles.directory(fh).entries
        for index in range(start_id, len(entries)):
            entry = entries[index]
            node = self.inodes.ensure(entry.kind, entry.owner, entry.key)
            if entry.kind is NodeKind.RESULT_FILE:  # most entries: no awaits
                attributes = self._result_entry(node)
            else:
                try:
                    attributes = await self._entry(node)
                except pyfuse3.FUSEError:  # gone since opendir: skip it, keep the offsets
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
        dir_name = decode_name(name)
        kind = parent.kind
        if kind is NodeKind.ONTOLOGY_ROOT:
            if ontology_file_name(dir_name) != dir_name:  # it would be listed otherwise
                raise InvalidName(f"not a valid ontology directory name: {dir_name!r}")
            await self.catalog.create_ontology(dir_name)
            self._touch("")
            return await self._remember(
                self.inodes.ensure(NodeKind.ONTOLOGY_DIR, f"{ONTOLOGY_DIR}/{dir_name}"))
        if kind not in (NodeKind.ROOT, NodeKind.ONTOLOGY_DIR, NodeKind.QUERY_DIR):
            raise _eperm()
        taken = {e.name for e in await self.tree.children(parent)}
        if dir_name in taken or dir_name in (ONTOLOGY_DIR, DOCUMENTS, INGEST, META_DIR) and \
                kind is not NodeKind.QUERY_DIR:
            raise pyfuse3.FUSEError(errno.EEXIST)
        base = () if kind is NodeKind.ROOT else query_path(parent.owner)
        query = await self.service.create((*base, dir_name))
        self._touch(parent.owner)
        return await self._remember(self.inodes.ensure(NodeKind.QUERY_DIR, query.key))

    @handler
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._node(parent_inode)
        dir_name = decode_name(name)
        child = await self.tree.child(parent, dir_name)
        if child.kind is NodeKind.ONTOLOGY_DIR:
            if not self.allow_ontology_delete:
                raise _eperm()
            await self.catalog.delete_ontology(ontology_of(child.owner))
        elif child.kind is NodeKind.QUERY_DIR:
            await self.service.remove(query_path(child.owner))
        elif child.kind is NodeKind.META_DIR:
            return  # part of its query (rm -r on the way to removing the query): accepted
        else:
            raise pyfuse3.FUSEError(errno.ENOTDIR if not child.kind.is_dir else errno.EPERM)
        self.inodes.detach_owner(child.owner)
        self._touch(parent.owner)

    @handler
    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        parent = self._node(parent_inode)
        link_name = decode_name(name)
        if parent.kind is not NodeKind.QUERY_DIR or parent.owner.startswith(ONTOLOGY_DIR + "/"):
            raise _eperm()
        if link_name in {e.name for e in await self.tree.children(parent)}:
            raise pyfuse3.FUSEError(errno.EEXIST)
        target_text = decode_name(target, PATH_MAX)
        ontology = resolve_link_target(parent.owner, target_text, self.mountpoint)
        if ontology is None or not await self.tree.ontology_exists(ontology):
            raise pyfuse3.FUSEError(errno.EINVAL)
        await self.service.add_link(query_path(parent.owner), Link(
            link_name, target_text, self.catalog.server_name(ontology)))
        self._touch(parent.owner)
        return await self._remember(self.inodes.ensure(NodeKind.LINK, parent.owner, link_name))

    @handler
    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        """FIFOs, sockets and devices have no meaning here (``mkfifo``: EPERM)."""
        decode_name(name)
        raise _eperm()

    # -- files ------------------------------------------------------------------------------

    @handler
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext
                   ) -> pyfuse3.FileInfo:
        node = self._node(inode)
        writing = (flags & os.O_ACCMODE) != os.O_RDONLY
        if node.kind is NodeKind.RESULT_FILE and not writing:  # the hot path: no awaits
            handle = FileHandle(node, snapshot=self.tree.result_body(node))
            return pyfuse3.FileInfo(fh=self.handles.add(handle), keep_cache=True)
        if node.kind.is_dir:
            raise pyfuse3.FUSEError(errno.EISDIR)
        if writing and node.kind in READ_ONLY:
            raise pyfuse3.FUSEError(errno.EACCES)
        await self.tree.refresh_meta(node)
        handle = FileHandle(node)
        if node.kind is NodeKind.SCRATCH_FILE and flags & os.O_TRUNC:
            self.scratch.resize(node.owner, node.name, 0)
        if node.kind is NodeKind.INGEST_FILE:
            pending = self.ingest.get(ontology_of(node.owner), node.name)
            if pending is None:
                raise enoent()
            self.ingest.opened(pending)
            if flags & os.O_TRUNC:
                self.ingest.truncate(pending, 0)
            return pyfuse3.FileInfo(fh=self.handles.add(handle), direct_io=True)
        handle.snapshot = await self.tree.content(node)
        control = CONTROL_BY_KIND.get(node.kind)
        if writing and control is not None:
            handle.session = WriteSession.begin(handle.snapshot, flags, control.append_replaces)
        fh = self.handles.add(handle)
        if node.kind is NodeKind.RESULT_FILE:  # pages dropped when the bytes change
            return pyfuse3.FileInfo(fh=fh, keep_cache=True)
        if node.kind is NodeKind.DOCUMENT_FILE:
            return pyfuse3.FileInfo(fh=fh, keep_cache=False)
        return pyfuse3.FileInfo(fh=fh, direct_io=True, keep_cache=False)

    @handler
    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext
                     ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self._node(parent_inode)
        file_name = decode_name(name)
        if parent.kind is NodeKind.META_DIR and file_name not in CONTROLS:
            self.tree.query(parent)
            self.scratch.create(parent.owner, file_name)
            node = self.inodes.ensure(NodeKind.SCRATCH_FILE, parent.owner, file_name)
        elif parent.kind is NodeKind.INGEST_DIR:
            pending = self.ingest.create(ontology_of(parent.owner), file_name)
            self.ingest.opened(pending)
            node = self.inodes.ensure(NodeKind.INGEST_FILE, parent.owner, file_name)
        else:
            raise _eperm()
        fh = self.handles.add(FileHandle(node))
        return pyfuse3.FileInfo(fh=fh, direct_io=True), await self._remember(node)

    @handler
    async def read(self, fh: int, off: int, size: int) -> bytes:
        handle = self.handles.open_file(fh)
        if handle.snapshot is None or handle.node.kind in (NodeKind.SCRATCH_FILE,
                                                            NodeKind.INGEST_FILE):
            handle.snapshot = await self.tree.content(handle.node)
        return handle.snapshot[off : off + size]

    @handler
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self.handles.open_file(fh)
        node = handle.node
        if node.kind is NodeKind.SCRATCH_FILE:
            self.scratch.write(node.owner, node.name, off, buf)
            return len(buf)
        if node.kind is NodeKind.INGEST_FILE:
            pending = self.ingest.get(ontology_of(node.owner), node.name)
            if pending is None:
                raise enoent()
            self.ingest.write(pending, off, buf)
            return len(buf)
        control = CONTROL_BY_KIND.get(node.kind)
        if handle.session is None or control is None or control.parse is None:
            raise pyfuse3.FUSEError(errno.EBADF)
        session = handle.session
        content = session.candidate(off, buf)  # ContentTooLarge -> EFBIG
        try:
            control.parse(content)  # InvalidThreshold/InvalidSetting -> EINVAL
        except ValueError:
            session.refuse()
            raise
        session.accept(content)  # validated, not committed: that happens at flush
        return len(buf)

    async def _commit_session(self, handle: FileHandle, releasing: bool = False) -> None:
        """Commit what one open() wrote, once. At flush, which close() waits for, so the
        change is durable when the command returns; after a refused last write nothing
        is committed and close() reports EINVAL too.

        A shell redirection (``echo 0.6 > f``, ``: > f``) closes its first descriptor,
        a flush, before the command writes: an empty truncated file is committed only
        at a later flush or at release, so ``echo 1.5 > f`` never commits "empty"."""
        session = handle.session
        control = CONTROL_BY_KIND.get(handle.node.kind)
        if session is None or control is None or control.parse is None:
            return
        if session.refused:
            if releasing:
                return
            raise pyfuse3.FUSEError(errno.EINVAL)
        content = session.due()
        if content is None:
            return
        if not session.attempted and not releasing:
            session.flushes += 1
            if session.flushes < 2:
                return
        session.committed()
        await self._commit(control, handle.node.owner, control.parse(content))
        handle.snapshot = None

    @handler
    async def flush(self, fh: int) -> None:
        handle = self.handles.file(fh)
        if handle is not None and handle.session is not None:  # read-only opens: nothing
            await self._commit_session(handle)

    @handler
    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh)
        if not isinstance(handle, FileHandle) or handle.node.kind is NodeKind.RESULT_FILE:
            return
        node = handle.node
        if node.kind is NodeKind.INGEST_FILE:
            pending = self.ingest.get(ontology_of(node.owner), node.name)
            if pending is not None:
                self.ingest.closed(ontology_of(node.owner), node.name, pending)
            return
        await self._commit_session(handle, releasing=True)  # usually done at flush

    @handler
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        parent = self._node(parent_inode)
        file_name = decode_name(name)
        child = await self.tree.child(parent, file_name)
        if child.kind is NodeKind.SCRATCH_FILE:
            self.scratch.pop(child.owner, child.name)
        elif child.kind in (NodeKind.INGEST_FILE, NodeKind.JOB_FILE):
            self.ingest.remove(ontology_of(child.owner), file_name)
        elif child.kind is NodeKind.LINK:
            await self.service.remove_link(query_path(child.owner), child.name)
        elif child.kind is NodeKind.DOCUMENT_FILE and self.allow_document_delete:
            await self.catalog.delete_document(child.name)
            self.service.content_changed()
        elif child.kind.is_dir:
            raise pyfuse3.FUSEError(errno.EISDIR)
        elif child.kind in VIEWS:
            return  # generated from the query: removing it changes nothing (see VIEWS)
        else:
            raise _eperm()
        self.inodes.detach(child.kind, child.owner, child.name)
        self._touch(parent.owner)

    @handler
    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int,
                     name_new: bytes, flags: int, ctx: pyfuse3.RequestContext) -> None:
        old_parent, new_parent = self._node(parent_inode_old), self._node(parent_inode_new)
        old, new = decode_name(name_old), decode_name(name_new)
        if flags:
            raise pyfuse3.FUSEError(errno.EINVAL)
        if old_parent.kind is NodeKind.INGEST_DIR and new_parent.kind is NodeKind.INGEST_DIR:
            self.ingest.move((ontology_of(old_parent.owner), old),
                             (ontology_of(new_parent.owner), new))
            self.inodes.move((NodeKind.INGEST_FILE, old_parent.owner, old),
                             (NodeKind.INGEST_FILE, new_parent.owner, new))
            return
        if (parent_inode_old != parent_inode_new or old_parent.kind is not NodeKind.META_DIR
                or old in CONTROLS):
            raise _eperm()
        await self._rename_scratch(old_parent, old, new)

    async def _rename_scratch(self, meta: Node, old: str, new: str) -> None:
        """``sed -i`` and editors: a scratch file renamed over a control file commits it
        (if valid); the kernel's inode for the scratch file now answers as the control."""
        content = self.scratch.get(meta.owner, old)
        if content is None:
            raise enoent()
        control = CONTROLS.get(new)
        if control is not None:
            if control.parse is None:
                raise _eperm()
            await self._commit(control, meta.owner, control.parse(bytes(content)))
            self.scratch.pop(meta.owner, old)
            new_key = (control.kind, meta.owner, "")
        else:
            self.scratch.move(meta.owner, old, new)
            new_key = (NodeKind.SCRATCH_FILE, meta.owner, new)
        self.inodes.move((NodeKind.SCRATCH_FILE, meta.owner, old), new_key)
