"""How writes to ``.meta`` control files turn into values.

Shells and editors write in different ways: ``echo 0.7 > f`` is open(O_TRUNC)+write,
``>>`` appends, ``truncate -s 0`` is a setattr, nano rewrites in place, ``sed -i``
writes a scratch file and renames it over the original. A ``WriteSession`` models the
file content one open() sees, so each style yields the full text to validate. Each
write is validated as it arrives (so ``echo 1.5 > f`` fails in the shell), but nothing
is committed before flush: one session changes the value at most once, and a refused
write changes nothing at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from kg_fuse.fs.errors import NoEntry, NoSpace, TooLarge

SCRATCH_MAX_BYTES = 64 * 1024
CONTROL_MAX_BYTES = 64 * 1024  # far above any valid value; parsing stays a few ms
SCRATCH_MAX_FILES = 32


class ContentTooLarge(TooLarge):
    """More bytes than a control or scratch file may hold, refused before any parsing."""


@dataclass
class WriteSession:
    """The content of a control file as seen through one writable open().

    A session is a transaction: writes are validated and buffered, never committed; the
    buffered content is committed once, at flush (which close() waits for), and only if
    the session's last write was accepted. A refused write therefore leaves the previous
    value in place, even after the shell's ``O_TRUNC``.
    """

    buffer: bytearray
    append: bool
    truncated: bool
    attempted: bool = False
    changed: bool = False  # accepted content not committed yet
    refused: bool = False  # the last write was refused: this session commits nothing
    flushes: int = 0  # flushes seen while nothing was written (see operations.flush)

    @classmethod
    def begin(cls, current: bytes, flags: int, append_replaces: bool = True) -> WriteSession:
        truncated = bool(flags & os.O_TRUNC)
        append = bool(flags & os.O_APPEND)
        # For a single-value file, what is appended is the new value: the comments and
        # old value shown on read are not part of what the user wrote. A list file keeps
        # its lines and gains the appended ones.
        start = b"" if truncated or (append and append_replaces) else current
        return cls(bytearray(start), append, truncated, changed=truncated)

    def candidate(self, offset: int, data: bytes) -> bytes:
        """The text this write would produce, without applying it (size checked first)."""
        self.attempted = True
        end = len(self.buffer) + len(data) if self.append else offset + len(data)
        if end > CONTROL_MAX_BYTES:
            self.refused = True
            raise ContentTooLarge(f"a control file holds at most {CONTROL_MAX_BYTES} bytes")
        if self.append:
            return bytes(self.buffer) + data
        content = bytearray(self.buffer)
        if offset > len(content):
            content.extend(b"\0" * (offset - len(content)))
        content[offset : offset + len(data)] = data
        return bytes(content)

    def accept(self, content: bytes) -> None:
        self.buffer = bytearray(content)
        self.changed = True
        self.refused = False

    def refuse(self) -> None:
        self.refused = True

    def truncate(self) -> None:
        self.buffer = bytearray()
        self.truncated = True
        self.attempted = False
        self.changed = True
        self.refused = False

    def due(self) -> bytes | None:
        """The content to commit now, or None when nothing is due (no accepted change,
        or the last write was refused)."""
        if self.refused or not self.changed:
            return None
        return bytes(self.buffer)

    def committed(self) -> None:
        self.changed = False

    @property
    def commits_empty_on_release(self) -> bool:
        """``> f`` with nothing written means an empty file: back to inheriting. A write
        that was attempted and refused must not turn into that."""
        return self.truncated and not self.attempted


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
