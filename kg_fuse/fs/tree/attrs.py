"""File attributes and their cache lifetimes, in one place.

Directories may be cached by the kernel for a second. Result files are cached for as long
as their listing is current (the caller passes the time left until ``--max-age``): every
change of a listing is pushed to the kernel (see ``kernel.notices``), so the cache never lags
behind it. Other files (``.meta`` controls, scratch and ingest files) have zero timeouts:
their size changes with writes, and they are rarely read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

import pyfuse3

from kg_fuse.fs.kernel.nodes import Owner

DIR_TIMEOUT = 1.0
FILE_TIMEOUT = 0.0
BLOCK_SIZE = 4096
INODES_REPORTED = 2**32  # ``df -i``'s total: inode numbers are 63-bit, held ones few


@dataclass
class Attributes:
    started_ns: int
    uid: int = field(default_factory=os.getuid)
    gid: int = field(default_factory=os.getgid)
    _meta_mtimes: dict[tuple[Owner, str], int] = field(default_factory=dict)

    def _base(self, inode: int, mtime_ns: int, timeout: float) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.generation = 0
        entry.entry_timeout = timeout
        entry.attr_timeout = timeout
        entry.st_uid = self.uid
        entry.st_gid = self.gid
        entry.st_blksize = BLOCK_SIZE
        entry.st_mtime_ns = entry.st_ctime_ns = entry.st_atime_ns = mtime_ns
        return entry

    def directory(self, inode: int, mtime_ns: int) -> pyfuse3.EntryAttributes:
        entry = self._base(inode, mtime_ns, DIR_TIMEOUT)
        entry.st_mode = stat.S_IFDIR | 0o755
        entry.st_nlink = 2
        entry.st_size = 0
        return entry

    def file(self, inode: int, size: int, mtime_ns: int, writable: bool,
             timeout: float = FILE_TIMEOUT) -> pyfuse3.EntryAttributes:
        entry = self._base(inode, mtime_ns, timeout)
        entry.st_mode = stat.S_IFREG | (0o644 if writable else 0o444)
        entry.st_nlink = 1
        entry.st_size = size
        entry.st_blocks = (size + 511) // 512
        return entry

    def link(self, inode: int, size: int) -> pyfuse3.EntryAttributes:
        entry = self._base(inode, self.started_ns, DIR_TIMEOUT)
        entry.st_mode = stat.S_IFLNK | 0o777
        entry.st_nlink = 1
        entry.st_size = size
        return entry

    def meta_mtime_ns(self, owner: tuple[Owner, str]) -> int:
        """When the directory of ``owner`` last changed (the mount's start if never)."""
        return self._meta_mtimes.get(owner, self.started_ns)

    def touch(self, owner: tuple[Owner, str], mtime_ns: int) -> None:
        self._meta_mtimes[owner] = mtime_ns

    def statfs(self, inodes_used: int, bytes_used: int, bytes_total: int
               ) -> pyfuse3.StatvfsData:
        """``df``: the room for files written into ``ingest/`` (held in memory until
        uploaded, ENOSPC past it) and how much of it is taken; inodes, which only the
        kernel's holdings use, as a number far from running out. A size of 0 and no
        free inodes read as a full disk to monitors."""
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = BLOCK_SIZE
        data.f_blocks = bytes_total // BLOCK_SIZE
        data.f_bfree = data.f_bavail = max(0, bytes_total - bytes_used) // BLOCK_SIZE
        data.f_files = max(INODES_REPORTED, 2 * inodes_used)
        data.f_ffree = data.f_favail = data.f_files - inodes_used
        data.f_namemax = 255
        return data
