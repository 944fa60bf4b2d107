"""Whether a process still holds one of this mount's files open, read from ``/proc``.

A FUSE flush says that *a* descriptor closed, not whose, nor whether others remain: a
shell's ``: > f`` and the exit of a child forked by ``cmd > f`` look the same. The
process that opened the file answers it: if it no longer has a descriptor on the file,
what it opened is closed as far as it is concerned. Any doubt answers "still held".
"""

from __future__ import annotations

import os

import trio

MAX_DESCRIPTORS = 4096  # beyond this, reading them costs more than the answer is worth


def _holds(pid: int, inode: int) -> bool:
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        descriptors = os.listdir(fdinfo)
    except OSError:  # gone, another user's, another pid namespace: cannot tell
        return True
    if len(descriptors) > MAX_DESCRIPTORS:
        return True
    wanted = f"ino:\t{inode}\n"
    for fd in descriptors:
        try:
            with open(f"{fdinfo}/{fd}", encoding="ascii", errors="replace") as info:
                if wanted in info.read():
                    return True
        except OSError:  # closed meanwhile
            continue
    return False


async def still_held_by(pid: int, inode: int) -> bool:
    """Whether process ``pid`` (as the kernel told it at open) has a descriptor on
    ``inode``; True when that cannot be told (pid 0, no /proc, no permission)."""
    if pid <= 0:
        return True
    return await trio.to_thread.run_sync(_holds, pid, inode)
