"""Open files and directories: what each FUSE file handle refers to."""

from __future__ import annotations

from dataclasses import dataclass, field

from kg_fuse.fs.kernel.errnos import BadHandle
from kg_fuse.fs.kernel.nodes import Node
from kg_fuse.fs.tree.meta.session import WriteSession


@dataclass
class FileHandle:
    node: Node
    session: WriteSession | None = None  # writable control files only
    snapshot: bytes | None = None  # the content as of open (or the last accepted write)
    opener: int = 0  # the process that opened it (0: unknown)


@dataclass
class DirHandle:
    entries: list = field(default_factory=list)  # the listing as of opendir (tree.Entry)


class HandleTable:
    def __init__(self) -> None:
        self._handles: dict[int, FileHandle | DirHandle] = {}
        self._next = 1

    def add(self, handle: FileHandle | DirHandle) -> int:
        fh = self._next
        self._next += 1
        self._handles[fh] = handle
        return fh

    def file(self, fh: int | None) -> FileHandle | None:
        handle = self._handles.get(fh) if fh is not None else None
        return handle if isinstance(handle, FileHandle) else None

    def open_file(self, fh: int) -> FileHandle:
        handle = self.file(fh)
        if handle is None:
            raise BadHandle(f"file handle {fh}")
        return handle

    def directory(self, fh: int) -> DirHandle:
        handle = self._handles.get(fh)
        if not isinstance(handle, DirHandle):
            raise BadHandle(f"directory handle {fh}")
        return handle

    def pop(self, fh: int) -> FileHandle | DirHandle | None:
        return self._handles.pop(fh, None)
