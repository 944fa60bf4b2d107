"""Giving freed heap pages back to the system: glibc keeps them otherwise, and a daemon
that once held many listings or inodes would keep their pages for good."""

from __future__ import annotations

import ctypes
import ctypes.util

TRIM_AFTER = 5000  # inodes forgotten between two heap trims


def _libc_trim() -> object:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_MALLOC_TRIM = _libc_trim()


def give_memory_back() -> None:
    """Return freed heap pages to the system (glibc keeps them otherwise): called when
    the kernel forgot many inodes, so the daemon's memory shrinks with the table."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)  # type: ignore[operator]
