"""The C heap's memory, handed back: glibc keeps what a process freed, so a daemon that
once held many listings, inodes or a large passing array would keep their pages for good.
Used by the mount (after many inodes or listings are dropped) and the server (after a
job, at start)."""

from __future__ import annotations

import ctypes
import ctypes.util

M_ARENA_MAX = -8  # glibc's mallopt parameter
MALLOC_ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


_LIBC = _libc()


def give_memory_back() -> None:
    """Return freed heap pages to the system (glibc keeps them otherwise). (Without
    glibc, nothing to do.)"""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


def few_malloc_arenas() -> None:
    """Before any thread starts: glibc gives each thread that meets another in malloc a
    heap of its own, up to 8 per core, and keeps what each freed. Some twenty threads
    serve the mounts, so the server's memory crept up all day (five minutes of the soak:
    up to 13% apart, and at most 7% with two heaps). (Without glibc, nothing to do.)"""
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is not None:
        mallopt(M_ARENA_MAX, MALLOC_ARENAS)
