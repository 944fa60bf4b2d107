"""Re-embedding a store with another model: all or nothing, the old store serving meanwhile.

``kg-fuse index --model NAME`` on a store another model embedded copies the store
(SQLite's online backup: a running server goes on serving the original), drops the
copy's vectors, embeds every concept again with a progress bar, measures the new model
once (its score scale and grade) and calibrates its default, and seals the copy into one
file. Only then does it take the store's place, by one rename: a ``kill -9`` at any
point before leaves the old store as it was, and the half-made copy is removed by the next run.

The rename waits for the store to be free: with a server running on it, the finished
copy is kept beside the store (``kg.sqlite3.next``) and the server's next start puts it
in place before opening anything (:func:`swap_in_ready`). A copy whose source changed
meanwhile (an ingest) is never put in place: it would lose that change. While it is
being made, the copy is made again from the store as it is now; after, the server's
start asked for that model re-embeds the store then (:class:`StaleCopy`).

The default calibrated for the old model is not carried over, nor an administrator's
value: both are in the old model's scores. The new store calibrates its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from kg_fuse import paths
from kg_fuse.exits import CommandError
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.graph import locked
from kg_fuse.server.embedding.leftovers import unless_locked
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.startup.prepare import prepare
from kg_fuse.server.storage import writes
from kg_fuse.server.storage.store import Store, read_setting_at
from kg_fuse.server.store_model import record as records
from kg_fuse.server.threshold.keys import IN_MODEL_SCORES

log = logging.getLogger(__name__)

#: The source store's epoch when it was copied: a copy is put in place only if the
#: source is still at it.
SOURCE_EPOCH_KEY = "reembedded_from_epoch"
#: How many copies a re-embed makes while ingests keep overtaking them.
ATTEMPTS = 3
#: Settings in the old model's scores, left behind.
OLD_MODEL_SETTINGS = IN_MODEL_SCORES


def partial_path(db: Path) -> Path:
    return db.with_name(db.name + ".partial")


def ready_path(db: Path) -> Path:
    return db.with_name(db.name + ".next")


def _files_of(path: Path) -> tuple[Path, ...]:
    """A SQLite store's file and the journals SQLite may keep beside it."""
    return (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal"))


def _remove(path: Path) -> None:
    for name in _files_of(path):
        with contextlib.suppress(FileNotFoundError):
            name.unlink()


def remove_interrupted(db: Path) -> list[Path]:
    """Remove the half-made copy a killed re-embed left beside ``db`` (not one a running
    re-embed is making: it holds the lock); returns what was removed, and logs it."""
    partial = partial_path(db)
    with unless_locked(partial) as free:
        if not free:
            return []
        removed = [name for name in _files_of(partial) if name.exists()]
        _remove(partial)
    for name in removed:
        log.warning("removed %s, left by an interrupted re-embed (kg-fuse index --model)",
                    name)
    return removed


def reembed(db: Path, embedder: Embedder, server_running: bool,
            progress: bool = True) -> Path:
    """Make ``db`` embedded by ``embedder``'s model; returns where the new store is (``db``,
    or :func:`ready_path` while a server holds ``db``). A copy whose source changed
    meanwhile (an ingest on the running server) is made again from the store as it is
    now, up to :data:`ATTEMPTS` times. Interrupted (Ctrl-C, ``kill``), it removes its
    half-made copy on the way out."""
    partial = partial_path(db)
    with locked(partial):
        try:
            for attempt in range(1, ATTEMPTS + 1):
                made_from = _embedded_copy(db, partial, embedder, progress)
                if _epoch_at(db) == made_from:
                    return _finish(db, partial, server_running)
                log.warning("the store changed while it was re-embedded (an ingest): "
                            "re-embedding it again from the store as it is now "
                            "(attempt %d of %d)", attempt + 1, ATTEMPTS)
            raise CommandError(
                f"the store kept changing while it was re-embedded ({db}): {ATTEMPTS} "
                "copies were each overtaken by a change, and were removed",
                hint="run it again once the ingests are done: "
                     + paths.command_line("index", *_data_dir_argv(db), "--model",
                                          embedder.name))
        except BaseException:
            _remove(partial)
            log.warning("re-embedding %s stopped; its half-made copy was removed", db)
            raise


def _data_dir_argv(db: Path) -> list[str]:
    """``--data-dir DIR`` naming the data directory of ``db`` (``DIR/server/kg.sqlite3``)."""
    return paths.data_dir_argv(db.parent.parent)


def _epoch_at(db: Path) -> int:
    return int(read_setting_at(db, "epoch") or 0)


def _embedded_copy(db: Path, partial: Path, embedder: Embedder, progress: bool) -> int:
    """A sealed copy of ``db`` at ``partial``, embedded by ``embedder``; returns the epoch
    of the store it was copied from."""
    _remove(partial)
    _remove(ready_path(db))
    source = Store(db)
    try:
        epoch = source.epoch()
        try:
            held = records.read(source)
            old = None if held is None else held.name
        except records.RecordUnreadable:
            old = "a model its record does not name"
        source.copy_to(partial)
    finally:
        source.close()
    log.info("re-embedding %s with %s (it was %s); the old store stays in place until "
             "the new one is complete", db, embedder.name, old or "empty")
    copy = Store(partial)
    try:
        writes.forget_vectors(copy)
        copy.delete_settings(OLD_MODEL_SETTINGS)
        records.forget(copy)  # no model until its vectors exist
        copy.set_setting(SOURCE_EPOCH_KEY, str(epoch))
        graph = KnowledgeGraph(copy, embedder)
        prepare(graph, corpus="none", progress=progress)
    finally:
        copy.seal()
    with open(partial, "rb") as written:
        os.fsync(written.fileno())
    return epoch


def _finish(db: Path, partial: Path, server_running: bool) -> Path:
    """The sealed copy put in place, or beside the store while a server holds it."""
    if server_running:
        os.replace(partial, ready_path(db))
        _sync_dir(db.parent)
        return ready_path(db)
    _put_in_place(ready_from=partial, db=db)
    return db


class StaleCopy(CommandError):
    """A finished copy whose source changed after it was made (an ingest between the
    end of ``index --model`` and the server's restart): removed, as it would lose that
    change."""

    def __init__(self, db: Path, model: str) -> None:
        super().__init__(
            f"the store changed after it was re-embedded with {model} ({db}): the new "
            "copy would lose that change and was removed",
            hint="re-embed it again: " + paths.command_line(
                "index", *_data_dir_argv(db), "--model", model))
        self.model = model


def swap_in_ready(db: Path) -> bool:
    """Put a finished re-embedded copy in place of ``db`` (the caller holds the store:
    no server runs on it). Returns whether one was; :class:`StaleCopy` if it was
    outdated."""
    ready = ready_path(db)
    if not ready.exists():
        return False
    made_from = read_setting_at(ready, SOURCE_EPOCH_KEY)
    now = read_setting_at(db, "epoch") if db.exists() else None
    if made_from is not None and now is not None and int(made_from) != int(now):
        try:
            held = records.read_at(ready)
        except records.RecordUnreadable:
            held = None
        name = "NAME" if held is None else held.name
        _remove(ready)
        raise StaleCopy(db, name)
    _put_in_place(ready_from=ready, db=db)
    return True


def _put_in_place(ready_from: Path, db: Path) -> None:
    """Rename the sealed copy over ``db``; the old store is sealed first, so no write-ahead
    log of it is left to be read as the new one's."""
    if db.exists():
        Store(db).seal()
    for log_file in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        with contextlib.suppress(FileNotFoundError):
            log_file.unlink()
    os.replace(ready_from, db)
    _sync_dir(db.parent)
    log.info("the re-embedded store is in place: %s", db)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
