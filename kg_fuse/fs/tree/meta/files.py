"""The ``.meta`` files as node kinds: control files, generated from their query and
written through a session, and editors' scratch files.

The commit protocol: a write is validated as it arrives and buffered in a
``session.WriteSession`` (a refused one is not applied); a close (flush, which
``close()`` waits for) commits what was accepted, only if the value changes (so a
control file's mtime moves with its value). The open's truncation alone is committed
when its opener has closed the file (see ``kernel.holders``), or at release.
"""

from __future__ import annotations

import os
import time

import trio

from kg_fuse.fs.kernel.errnos import BadHandle, Invalid, NoEntry, ReadOnly
from kg_fuse.fs.kernel.holders import still_held_by
from kg_fuse.fs.kernel.nodes import Node, NodeKind
from kg_fuse.fs.tree.behaviour import Behaviour, writing
from kg_fuse.fs.tree.handles import FileHandle
from kg_fuse.fs.tree.meta.controls import Control
from kg_fuse.fs.tree.meta.session import WriteSession
from kg_fuse.fs.tree.mount_tree import Tree, query_path


async def commit(tree: Tree, control: Control, node: Node, value: object) -> None:
    """Set a control's value, once; an unchanged value changes nothing (no refresh,
    no mtime: vim's "changed since reading" check compares mtimes)."""
    assert control.commit is not None and control.current is not None
    path = query_path(node.owner)  # a node in the query's .meta
    if control.current(tree.service.get(path)) == value:
        return
    tree.touch(node)
    tree.touch(node, control.kind)
    await control.commit(tree.service, path, value)  # state changes before any await
    await tree.settle()  # names that left stop resolving before we return


class ControlFile(Behaviour):
    """A ``.meta`` control file (see ``controls.CONTROLS``): generated from the query;
    the writable ones take a new value through a write session."""

    def __init__(self, control: Control) -> None:
        self.control = control
        self.writable = control.writable

    async def content(self, tree: Tree, node: Node) -> bytes:
        query = tree.query(node)
        data = self.control.render(tree, query, tree.service.held.fetch_error(query.key))
        if not self.writable and data != node.last_body:  # status, query.toml
            node.last_body, node.last_mtime_ns = data, time.time_ns()
        return data

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        if self.writable:  # moves only with its own value
            return tree.mtime_ns(node, node.kind)
        if not node.last_mtime_ns:
            await self.content(tree, node)
        return node.last_mtime_ns  # when the bytes last changed, as the mount saw them

    def rereads(self, handle: FileHandle, offset: int) -> bool:
        """A read from the start, or at or past the end of what the handle read, sees
        the current bytes (``tail -f``, ``less +F``: the size they see is the current
        one); a read in the middle goes on with the same version, so no reader gets
        half of each."""
        return handle.snapshot is None or offset == 0 or offset >= len(handle.snapshot)

    async def refresh(self, tree: Tree, node: Node) -> None:
        """Learn the server default if stale; for the status, also try to fetch the
        results it describes and look at the server now, so a stopped server shows on
        this read (the deadlines run side by side)."""
        query = tree.query(node)
        if node.kind is not NodeKind.STATUS_FILE:
            await tree.service.server.current_default()
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tree.service.server.current_default)
            nursery.start_soon(tree.service.refresh_status, query)
            nursery.start_soon(tree.service.server.look)

    async def unlink(self, tree: Tree, node: Node) -> bool:
        return False  # generated: ``rm -r QUERY`` removes the query quietly

    async def open(self, tree: Tree, handle: FileHandle, flags: int) -> None:
        handle.snapshot = await self.content(tree, handle.node)
        if writing(flags) and self.writable:
            handle.session = WriteSession.begin(handle.snapshot, flags,
                                                self.control.append_replaces, handle.opener)

    async def truncate(self, tree: Tree, node: Node, size: int,
                       handle: FileHandle | None) -> None:
        if not self.writable:
            raise ReadOnly(f"{node.kind.value} is read-only")
        if size != 0:
            raise Invalid("a control file can only be emptied")
        if handle is not None and handle.session is not None:
            handle.session.truncate()  # committed with the session, at the next close
        else:  # truncate(1) on the path: an empty file, durable on return
            assert self.control.parse is not None
            await commit(tree, self.control, node, self.control.parse(b""))

    async def write(self, tree: Tree, handle: FileHandle, offset: int, data: bytes) -> int:
        session, parse = handle.session, self.control.parse
        if session is None or parse is None:
            raise BadHandle("not open for writing")
        if not data:  # writes nothing: not a value, not even an empty one
            return 0
        content = session.candidate(offset, data)  # ContentTooLarge
        try:
            parse(content)  # InvalidThreshold/InvalidSetting
        except ValueError:
            session.refuse()
            raise
        session.accept(content)  # validated, not committed: that happens at a close
        return len(data)

    async def flush(self, tree: Tree, handle: FileHandle) -> None:
        """A descriptor closed: commit what was accepted. Every process holding the
        descriptor closes it, a forked child before the command writes, the shell when
        it moves the descriptor; so the open's bare truncation is committed only once
        its opener holds the file no more (``: > f``). After a refused last write,
        close() reports EINVAL too."""
        session = handle.session
        if session is None:
            return
        opener_closed = session.waits_for_opener and not await still_held_by(
            session.opener, handle.node.inode)
        await self._commit(tree, handle, opener_closed)
        if session.refused:
            raise Invalid("the last write was refused; the file keeps its last valid value")

    async def release(self, tree: Tree, handle: FileHandle) -> None:
        """The last descriptor closed: what is still due (``: > f`` whose opener could
        not be asked, usually nothing)."""
        await self._commit(tree, handle, opener_closed=True)

    async def _commit(self, tree: Tree, handle: FileHandle, opener_closed: bool) -> None:
        session, parse = handle.session, self.control.parse
        if session is None or parse is None:
            return
        content = session.due(opener_closed)
        if content is None:
            return
        session.committed()  # before awaiting: a write meanwhile is due at the next close
        await commit(tree, self.control, handle.node, parse(content))
        handle.snapshot = None


class ScratchFile(Behaviour):
    """An editor's temporary file in ``.meta``, in memory until renamed or removed."""

    writable = chown = live = True

    async def content(self, tree: Tree, node: Node) -> bytes:
        data = tree.scratch.get(node.owner, node.name)
        if data is None:
            raise NoEntry(node.name)
        return bytes(data)

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        """Its last write or the time set on it, while the kernel holds it (else its
        directory's)."""
        return node.last_mtime_ns or tree.mtime_ns(node)

    async def set_times(self, tree: Tree, node: Node, mtime_ns: int | None) -> None:
        if mtime_ns is not None:
            node.last_mtime_ns = mtime_ns

    async def open(self, tree: Tree, handle: FileHandle, flags: int) -> None:
        if flags & os.O_TRUNC:
            tree.scratch.resize(handle.node.owner, handle.node.name, 0)
            handle.node.last_mtime_ns = time.time_ns()
        await super().open(tree, handle, flags)

    async def truncate(self, tree: Tree, node: Node, size: int,
                       handle: FileHandle | None) -> None:
        tree.scratch.resize(node.owner, node.name, size)
        node.last_mtime_ns = time.time_ns()

    async def write(self, tree: Tree, handle: FileHandle, offset: int, data: bytes) -> int:
        tree.scratch.write(handle.node.owner, handle.node.name, offset, data)
        handle.node.last_mtime_ns = time.time_ns()
        return len(data)

    async def unlink(self, tree: Tree, node: Node) -> bool:
        tree.scratch.pop(node.owner, node.name)
        return True
