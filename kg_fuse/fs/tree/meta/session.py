"""How writes to a ``.meta`` control file turn into its value: one open's session.

Shells and editors write in different ways: ``echo 0.7 > f`` is open(O_TRUNC)+write,
``>>`` appends, ``truncate -s 0`` is a setattr, nano rewrites in place, ``sed -i``
writes a scratch file and renames it over the original. A ``WriteSession`` models the
file content one open() sees, so each style yields the full text to validate. Each
write is validated as it arrives (so ``echo 1.5 > f`` fails in the shell) and a refused
one is not applied; a close commits what was accepted. The open's truncation alone is
not a value: every process holding the descriptor (a shell, the children it forks, a
launcher) closes it, and those closes must not turn "nothing written yet" into "empty".
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kg_fuse.fs.kernel.errnos import TooLarge

CONTROL_MAX_BYTES = 64 * 1024  # far above any valid value; parsing stays a few ms


class ContentTooLarge(TooLarge):
    """More bytes than a control or scratch file may hold, refused before any parsing."""


@dataclass
class WriteSession:
    """The content of a control file as seen through one writable open(), shared by
    every process that holds a descriptor of it.

    Only valid content is kept: a write is parsed as it arrives, and a refused one is
    not applied. A close commits the content when a write or an explicit truncation put
    it there (``pending``), unless the last write was refused: then nothing, until a
    later write is accepted. The open's own ``O_TRUNC`` (``bare_truncation``) is
    committed as "empty" only at the opener's last close or at release: so a child that
    exits before the command writes, and a refused write, leave the value in place.
    """

    buffer: bytearray
    append: bool
    opener: int = 0  # the process that opened the file, as the kernel named it (0: unknown)
    bare_truncation: bool = False  # empty only because of O_TRUNC: nothing written yet
    pending: bool = False  # accepted content not committed yet
    refused: bool = False  # the last write was refused

    @classmethod
    def begin(cls, current: bytes, flags: int, append_replaces: bool = True,
              opener: int = 0) -> WriteSession:
        truncated = bool(flags & os.O_TRUNC)
        append = bool(flags & os.O_APPEND)
        # For a single-value file, what is appended is the new value: the comments and
        # old value shown on read are not part of what the user wrote. A list file keeps
        # its lines and gains the appended ones.
        start = b"" if truncated or (append and append_replaces) else current
        return cls(bytearray(start), append, opener, bare_truncation=truncated)

    def candidate(self, offset: int, data: bytes) -> bytes:
        """The text this write would produce, without applying it (size checked first)."""
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
        self.pending = True
        self.bare_truncation = self.refused = False

    def refuse(self) -> None:
        self.refused = True

    def truncate(self) -> None:
        """An explicit truncation (``ftruncate``, ``truncate -s 0``): an empty file."""
        self.buffer = bytearray()
        self.pending = True
        self.bare_truncation = self.refused = False

    @property
    def waits_for_opener(self) -> bool:
        """Nothing but the open's truncation: whether "empty" is due depends on who
        still holds the file."""
        return self.bare_truncation and not self.refused

    def due(self, opener_closed: bool) -> bytes | None:
        """The content to commit at a close, or None: nothing after a refused last
        write; else accepted content not committed yet, or the bare truncation once the
        opener closed the file (``opener_closed``, always true at release)."""
        if self.refused:
            return None
        if self.pending:
            return bytes(self.buffer)
        if self.bare_truncation and opener_closed:
            return b""
        return None

    def committed(self) -> None:
        self.pending = self.bare_truncation = False
