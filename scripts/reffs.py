"""A minimal in-memory pyfuse3 filesystem: the benchmark's reference for "as fast as the
kernel allows". It serves a fixed tree of directories and files (the very bytes a
kg-fuse mount served), read-only, with long kernel cache timeouts and kept pages.

    python scripts/reffs.py TREE.json MOUNTPOINT

TREE.json: ``{"dir name": {"file name": "base64 bytes", ...}, ...}``. Runs in the
foreground until unmounted (``fusermount3 -u``) or signalled.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import signal
import stat
import sys

import pyfuse3
import trio

TIMEOUT = 300.0


class ReferenceFs(pyfuse3.Operations):
    def __init__(self, tree: dict[str, dict[str, bytes]]) -> None:
        super().__init__()
        self.names: dict[int, dict[bytes, int]] = {pyfuse3.ROOT_INODE: {}}
        self.data: dict[int, bytes] = {}
        inode = pyfuse3.ROOT_INODE
        for dir_name, files in tree.items():
            inode += 1
            directory = inode
            self.names[pyfuse3.ROOT_INODE][os.fsencode(dir_name)] = directory
            self.names[directory] = {}
            for file_name, body in files.items():
                inode += 1
                self.names[directory][os.fsencode(file_name)] = inode
                self.data[inode] = body
        self.listings = {d: sorted(children.items()) for d, children in self.names.items()}

    def _attrs(self, inode: int) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.entry_timeout = entry.attr_timeout = TIMEOUT
        if inode in self.names:
            entry.st_mode, entry.st_nlink, entry.st_size = stat.S_IFDIR | 0o755, 2, 0
        else:
            entry.st_mode, entry.st_nlink = stat.S_IFREG | 0o444, 1
            entry.st_size = len(self.data[inode])
        entry.st_uid, entry.st_gid = os.getuid(), os.getgid()
        entry.st_blksize = 4096
        entry.st_blocks = (entry.st_size + 511) // 512
        return entry

    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
                     ) -> pyfuse3.EntryAttributes:
        inode = self.names.get(parent_inode, {}).get(name)
        if inode is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attrs(inode)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext
                      ) -> pyfuse3.EntryAttributes:
        return self._attrs(inode)

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        return inode

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        listing = self.listings[fh]
        for index in range(start_id, len(listing)):
            name, inode = listing[index]
            if not pyfuse3.readdir_reply(token, name, self._attrs(inode), index + 1):
                return

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext
                   ) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EACCES)
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return self.data[fh][off:off + size]


async def serve(tree: dict[str, dict[str, bytes]], mountpoint: str) -> None:
    pyfuse3.init(ReferenceFs(tree), mountpoint, {"fsname=kg-fuse-reference", "ro"})
    try:
        async with trio.open_nursery() as nursery:
            async def on_signal() -> None:
                with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        pyfuse3.terminate()
                        return

            nursery.start_soon(on_signal)
            await pyfuse3.main()
            nursery.cancel_scope.cancel()
    finally:
        pyfuse3.close(unmount=True)


def main() -> int:
    tree_path, mountpoint = sys.argv[1:3]
    with open(tree_path) as f:
        raw = json.load(f)
    tree = {d: {n: base64.b64decode(b) for n, b in files.items()} for d, files in raw.items()}
    trio.run(serve, tree, mountpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
