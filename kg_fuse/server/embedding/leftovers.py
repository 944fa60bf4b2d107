"""What an interrupted model install or graph build left behind, found and removed.

``kg-fuse model add`` copies a model into a hidden folder beside the others
(``.NAME.XXXXXX``) and writes its graph to a hidden ``.GRAPH.XXXXXX.partial`` file, both
renamed into place only when whole. Ctrl-C or ``kill`` removes them on the way out; a
``kill -9`` cannot, so the next command that owns these folders (``model add``,
``model list``, ``index``, ``serve``) removes them, unless the process making them is
still at work: it holds the lock (:func:`kg_fuse.server.embedding.graph.locked`) a
removal must take first.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)


@contextlib.contextmanager
def unless_locked(path: Path) -> Iterator[bool]:
    """Whether ``path``'s lock file (``path.lock``, as :func:`.graph.locked` takes it)
    was free: taken for the block if so, so no maker starts meanwhile."""
    lock_file = path.with_name(path.name + ".lock")
    if not lock_file.parent.is_dir():
        yield True
        return
    with open(lock_file, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def remove_interrupted_models() -> list[Path]:
    """Remove the half-copied models and half-written graphs a killed ``model add`` or
    first start left (none whose maker still runs); returns what was removed."""
    from kg_fuse.server.embedding.models import graphs_dir, user_models_dir

    removed: list[Path] = []
    root = user_models_dir()
    if root.is_dir():
        with unless_locked(root / ".add") as free:
            for folder in root.glob(".*.*") if free else ():
                if folder.is_dir():
                    shutil.rmtree(folder, ignore_errors=True)
                    removed.append(folder)
    graphs = graphs_dir()
    for partial in graphs.glob(".*.partial") if graphs.is_dir() else ():
        target = graphs / partial.name[1:].rsplit(".", 2)[0]  # .NAME.XXXXXX.partial
        with unless_locked(target) as free:
            if free:
                partial.unlink(missing_ok=True)
                removed.append(partial)
    for path in removed:
        log.warning("removed %s, left by an interrupted model install", path)
    return removed
