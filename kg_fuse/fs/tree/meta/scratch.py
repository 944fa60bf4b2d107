"""Editors' scratch files in ``.meta`` (``sed -i``, vim's swap and backup files): kept in
memory with their query's state, renamed over a control file to commit it
(``directory.MetaDir.rename``)."""

from __future__ import annotations

from collections.abc import Callable

from kg_fuse.fs.kernel.errnos import NoEntry, NoSpace
from kg_fuse.fs.tree.meta.session import ContentTooLarge

SCRATCH_MAX_BYTES = 64 * 1024
SCRATCH_MAX_FILES = 32


class ScratchFiles:
    """Editors' temporary files in a ``.meta`` directory, kept in memory only, with
    their query's state (``files_of(query)`` gives that query's files by name), so they
    go when the query does."""

    def __init__(self, files_of: Callable[[str], dict[str, bytearray]]) -> None:
        self._files_of = files_of

    def names(self, query: str) -> list[str]:
        return sorted(self._files_of(query))

    def get(self, query: str, name: str) -> bytearray | None:
        return self._files_of(query).get(name)

    def create(self, query: str, name: str) -> bytearray:
        files = self._files_of(query)
        if name not in files and len(files) >= SCRATCH_MAX_FILES:
            raise NoSpace(f"a .meta directory holds at most {SCRATCH_MAX_FILES} scratch files")
        return files.setdefault(name, bytearray())

    def write(self, query: str, name: str, offset: int, data: bytes) -> None:
        content = self.get(query, name)
        if content is None:
            raise NoEntry(name)
        if offset + len(data) > SCRATCH_MAX_BYTES:
            raise ContentTooLarge(f"a scratch file holds at most {SCRATCH_MAX_BYTES} bytes")
        if offset > len(content):
            content.extend(b"\0" * (offset - len(content)))
        content[offset : offset + len(data)] = data

    def resize(self, query: str, name: str, size: int) -> None:
        content = self.get(query, name)
        if content is None:
            raise NoEntry(name)
        if size > SCRATCH_MAX_BYTES:
            raise ContentTooLarge(f"a scratch file holds at most {SCRATCH_MAX_BYTES} bytes")
        del content[size:]
        content.extend(b"\0" * (size - len(content)))

    def pop(self, query: str, name: str) -> bytearray | None:
        return self._files_of(query).pop(name, None)

    def move(self, query: str, old: str, new: str) -> None:
        files = self._files_of(query)
        content = files.pop(old, None)
        if content is None:
            raise NoEntry(old)
        files[new] = content
