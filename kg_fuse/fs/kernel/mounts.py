"""The kernel's mount table (``/proc/self/mountinfo``): what is mounted where, which of
those mounts are kg-fuse's, and waiting for the table to change.

Read without touching any mountpoint: a mount whose process died answers every look
with "transport endpoint is not connected", and the filesystem's own process would
deadlock looking at its mountpoint. Light imports only: ``kg-fuse status`` uses it.
"""

from __future__ import annotations

import os
import re
import select
from dataclasses import dataclass
from typing import IO

#: What a kg-fuse mount is called in the mount table: the ``fsname=`` and ``subtype=``
#: it is mounted with, so its type reads ``fuse.kg-fuse`` and its source ``kg-fuse``.
FSNAME = "kg-fuse"
SUBTYPE = "kg-fuse"
MOUNTINFO = "/proc/self/mountinfo"

_ESCAPED = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class MountEntry:
    """One line of the mount table: where, what type, from what source."""

    mountpoint: str
    fstype: str
    source: str

    @property
    def is_kg_fuse(self) -> bool:
        """Mounted by kg-fuse (alive or dead: a dead mount keeps its line), told by its
        type alone. The platform's own FUSE client also calls itself kg-fuse, but mounts
        with no subtype (type ``fuse``, source ``kg-fuse``): its mounts are not ours."""
        return self.fstype == f"fuse.{SUBTYPE}"


def _unescape(field: str) -> str:
    """The kernel writes space, tab, newline and backslash as octal escapes."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 8)), field)


def _parse(line: str) -> MountEntry | None:
    fields = line.rstrip("\n").split(" ")
    try:  # ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
        separator = fields.index("-", 6)
        return MountEntry(_unescape(fields[4]), _unescape(fields[separator + 1]),
                          _unescape(fields[separator + 2]))
    except (ValueError, IndexError):
        return None


def entries() -> list[MountEntry]:
    """Every mount this process sees, in the table's order (a later mount on the same
    point covers the earlier one)."""
    with open(MOUNTINFO, encoding="utf-8", errors="surrogateescape") as f:
        return [entry for entry in map(_parse, f) if entry is not None]


def mounted_at(path: str | os.PathLike[str]) -> MountEntry | None:
    """The mount a user sees at ``path`` (symlinks and ``..`` resolved), or None when
    ``path`` is not a mountpoint."""
    where = os.path.realpath(os.fspath(path))  # a dead mount's ENOTCONN: not a link
    found = None
    for entry in entries():
        if entry.mountpoint == where:
            found = entry  # the last one is on top
    return found


def listed(mountpoint: str) -> bool:
    """Whether the table still lists a mount at exactly ``mountpoint`` (no resolving:
    the filesystem's own process must not look at its mountpoint)."""
    return any(entry.mountpoint == mountpoint for entry in entries())


def wait_for_mount_change(table: IO[bytes], timeout: float | None = None,
                          pidfd: int | None = None) -> None:
    """Block until the mount table changes (a mount or unmount anywhere: the kernel marks
    ``table``, an open ``/proc/self/mountinfo``, with POLLPRI; a change since it was
    opened or last reported counts), ``pidfd``'s process exits, or ``timeout`` passes."""
    poller = select.poll()
    poller.register(table.fileno(), select.POLLPRI)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    poller.poll(None if timeout is None else max(0.0, timeout) * 1000)
