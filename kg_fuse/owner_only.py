"""Owner-only modes for what kg-fuse keeps: its folders 0700, its store and logs 0600.

The store holds the full text of every ingested document and the logs every search text
and file name, so no other local user may read them. New folders and files are created
owner-only; an install made before (0755 folders, 0644 files) is fixed at the next start,
and the caller logs what was fixed in one line (:func:`log_fixed`). Light imports only.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600


def _make_mode(path: Path, mode: int) -> str | None:
    """Set ``path``'s permission bits to ``mode``; what was fixed, or None if nothing."""
    try:
        current = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None
    if current == mode:
        return None
    os.chmod(path, mode)
    return f"{path} (was {current:04o})"


def create_dir(path: Path) -> None:
    """Create ``path`` owner-only if it is missing (its missing parents get the usual
    mode: they are not kg-fuse's); an existing one is left as it is."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(path, DIR_MODE)  # mkdir's mode passes through the umask


def private_dirs(dirs: Iterable[Path]) -> list[str]:
    """Create each folder 0700, or make an existing one so; returns what was fixed."""
    fixed = []
    for folder in dirs:
        create_dir(folder)
        change = _make_mode(folder, DIR_MODE)
        if change is not None:
            fixed.append(change)
    return fixed


def private_files(files: Iterable[Path]) -> list[str]:
    """Make each existing file 0600; returns what was fixed."""
    return [change for path in files if (change := _make_mode(path, FILE_MODE)) is not None]


def create_file(path: Path) -> None:
    """Create ``path`` empty and 0600 if it is missing (SQLite then keeps that mode, and
    gives it to the store's ``-wal`` and ``-shm`` files too)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))


def open_private(path: Path, append: bool = True) -> int:
    """A file descriptor writing ``path`` (appending, or from empty), created 0600 if
    missing: for logs, private from their first line on (an existing one is fixed by
    :func:`private_files`, which says so)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    return os.open(path, flags, FILE_MODE)


def log_fixed(fixed: list[str]) -> None:
    """Say once, in one line, which folders and files were readable by others."""
    if fixed:
        log.info("made private (owner only: folders 0700, files 0600): %s",
                 ", ".join(fixed))
