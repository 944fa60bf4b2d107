"""Driving ``KgOperations`` without a kernel: path walks, listings, reads and writes made
of the same handler calls the kernel would send, with the lookup counts it would keep.

Only pyfuse3's reply and notification functions are replaced (``readdir_reply`` collects
entries; ``invalidate_entry``/``invalidate_inode`` are recorded), the way s3ql's
``t3_fs_api`` tests drive its ``Operations``. Everything else is the real code: the
handlers, their error wrapper, the tree, the query service, the caches and the client,
talking to the real server app in-process.

    fs = FsDriver(operations)
    await fs.mkdir("compress data with gzip")
    names = await fs.listdir("compress data with gzip")
    text = await fs.read("compress data with gzip/.meta/threshold")
    await fs.write("compress data with gzip/.meta/threshold", b"0.5\\n")
    with pytest.raises(pyfuse3.FUSEError) as e: ...; e.value.errno == errno.EINVAL
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace

import pyfuse3

from kg_fuse.fs.handlers.operations import KgOperations

CTX = pyfuse3.RequestContext()


@dataclass
class Listed:
    name: str
    attributes: pyfuse3.EntryAttributes
    next_id: int


@dataclass
class KernelLog:
    """What the filesystem told the kernel to forget, in order."""

    names: list[tuple[int, bytes]] = field(default_factory=list)
    inodes: list[int] = field(default_factory=list)

    def clear(self) -> None:
        self.names.clear()
        self.inodes.clear()


def install_fake_kernel(monkeypatch, operations: KgOperations) -> KernelLog:  # noqa: ANN001
    """Replace pyfuse3's reply and notification calls; turn the kernel cache on."""
    log = KernelLog()

    def readdir_reply(token: list[Listed], name: bytes, attributes: pyfuse3.EntryAttributes,
                      next_id: int) -> bool:
        token.append(Listed(os.fsdecode(name), attributes, next_id))
        return True

    def invalidate_entry(parent: int, name: bytes, deleted: int = 0) -> None:
        log.names.append((parent, name))

    def invalidate_inode(inode: int, attr_only: bool = False) -> None:
        log.inodes.append(inode)

    monkeypatch.setattr(pyfuse3, "readdir_reply", readdir_reply)
    monkeypatch.setattr(pyfuse3, "invalidate_entry", invalidate_entry)
    monkeypatch.setattr(pyfuse3, "invalidate_inode", invalidate_inode)
    operations.kernel.enabled = True
    return log


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


class FsDriver:
    """Shell-like calls over the handlers; paths are relative to the mount's root."""

    def __init__(self, operations: KgOperations) -> None:
        self.ops = operations

    async def lookup(self, path: str) -> pyfuse3.EntryAttributes:
        """Walk ``path`` as the kernel does (one ``lookup`` per component)."""
        attributes = await self.ops.getattr(pyfuse3.ROOT_INODE, CTX)
        for part in _parts(path):
            attributes = await self.ops.lookup(attributes.st_ino, os.fsencode(part), CTX)
        return attributes

    async def inode(self, path: str) -> int:
        return int((await self.lookup(path)).st_ino)

    async def stat(self, path: str) -> pyfuse3.EntryAttributes:
        return await self.ops.getattr(await self.inode(path), CTX)

    async def _parent(self, path: str) -> tuple[int, bytes]:
        parts = _parts(path)
        parent = await self.inode("/".join(parts[:-1]))
        return parent, os.fsencode(parts[-1])

    async def readdir(self, path: str = "") -> list[Listed]:
        """opendir + readdir (in pages of ``page`` entries) + releasedir."""
        fh = await self.ops.opendir(await self.inode(path), CTX)
        entries: list[Listed] = []
        try:
            while True:
                token: list[Listed] = []
                await self.ops.readdir(fh, entries[-1].next_id if entries else 0, token)
                if not token:
                    return entries
                entries += token
        finally:
            await self.ops.releasedir(fh)

    async def listdir(self, path: str = "") -> list[str]:
        """The names ``ls -A`` shows, in listing order."""
        return [e.name for e in await self.readdir(path) if e.name not in (".", "..")]

    async def open(self, path: str, flags: int = os.O_RDONLY) -> int:
        return (await self.ops.open(await self.inode(path), flags, CTX)).fh

    async def read(self, path: str) -> bytes:
        """open, read until a short read, flush, release (``cat``)."""
        fh = await self.open(path)
        chunks = []
        try:
            offset = 0
            while chunk := await self.ops.read(fh, offset, 65536):
                chunks.append(chunk)
                offset += len(chunk)
            await self.ops.flush(fh)
        finally:
            await self.ops.release(fh)
        return b"".join(chunks)

    async def write(self, path: str, data: bytes, flags: int = os.O_WRONLY | os.O_TRUNC
                    ) -> None:
        """``printf DATA > path`` as the shell does it: open(O_TRUNC), write, flush,
        release; an error from write or flush is raised after the file is released."""
        fh = await self.open(path, flags)
        try:
            if data:
                written = await self.ops.write(fh, 0, data)
                assert written == len(data)
            await self.ops.flush(fh)
        finally:
            await self.ops.release(fh)

    async def create(self, path: str, data: bytes = b"") -> int:
        """``cat > path`` of a new file: create, write, flush, release; its inode."""
        parent, name = await self._parent(path)
        info, attributes = await self.ops.create(parent, name, 0o644,
                                                 os.O_WRONLY | os.O_CREAT, CTX)
        try:
            if data:
                await self.ops.write(info.fh, 0, data)
            await self.ops.flush(info.fh)
        finally:
            await self.ops.release(info.fh)
        return int(attributes.st_ino)

    async def mkdir(self, path: str) -> pyfuse3.EntryAttributes:
        parent, name = await self._parent(path)
        return await self.ops.mkdir(parent, name, 0o755, CTX)

    async def rmdir(self, path: str) -> None:
        parent, name = await self._parent(path)
        await self.ops.rmdir(parent, name, CTX)

    async def unlink(self, path: str) -> None:
        parent, name = await self._parent(path)
        await self.ops.unlink(parent, name, CTX)

    async def symlink(self, path: str, target: str) -> pyfuse3.EntryAttributes:
        parent, name = await self._parent(path)
        return await self.ops.symlink(parent, name, os.fsencode(target), CTX)

    async def readlink(self, path: str) -> str:
        return os.fsdecode(await self.ops.readlink(await self.inode(path), CTX))

    async def rename(self, old: str, new: str) -> None:
        old_parent, old_name = await self._parent(old)
        new_parent, new_name = await self._parent(new)
        await self.ops.rename(old_parent, old_name, new_parent, new_name, 0, CTX)

    async def getxattr(self, path: str, name: bytes) -> bytes:
        return await self.ops.getxattr(await self.inode(path), name, CTX)

    async def listxattr(self, path: str) -> list[bytes]:
        return await self.ops.listxattr(await self.inode(path), CTX)

    async def truncate(self, path: str, size: int = 0) -> pyfuse3.EntryAttributes:
        """``truncate -s SIZE path``: setattr(size) with no open handle."""
        attributes = pyfuse3.EntryAttributes()
        attributes.st_size = size
        # pyfuse3's SetattrFields is read-only from Python: the same fields, as the
        # kernel sets them for truncate(2)
        fields = SimpleNamespace(update_size=True, update_mode=False, update_uid=False,
                                 update_gid=False, update_atime=False, update_mtime=False,
                                 update_ctime=False)
        return await self.ops.setattr(await self.inode(path), attributes, fields, None, CTX)

    def lookups(self, inode: int) -> int:
        """The lookup count the filesystem keeps for ``inode`` (0 if it forgot it)."""
        node = self.ops.inodes.get(inode)
        return 0 if node is None else node.lookups
