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
meanwhile (an ingest) is not put in place: it would lose that change.

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
#: Settings in the old model's scores, left behind.
OLD_MODEL_SETTINGS = IN_MODEL_SCORES


def partial_path(db: Path) -> Path:
    return db.with_name(db.name + ".partial")


def ready_path(db: Path) -> Path:
    return db.with_name(db.name + ".next")


def _remove(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        with contextlib.suppress(FileNotFoundError):
            name.unlink()


def reembed(db: Path, embedder: Embedder, server_running: bool,
            progress: bool = True) -> Path:
    """Make ``db`` embedded by ``embedder``'s model; returns where the new store is (``db``,
    or :func:`ready_path` while a server holds ``db``)."""
    partial = partial_path(db)
    _remove(partial)  # a run killed midway
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
    if server_running:
        os.replace(partial, ready_path(db))
        _sync_dir(db.parent)
        return ready_path(db)
    _put_in_place(ready_from=partial, db=db)
    return db


def swap_in_ready(db: Path) -> bool:
    """Put a finished re-embedded copy in place of ``db`` (the caller holds the store:
    no server runs on it). Returns whether one was."""
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
        raise CommandError(
            f"the store changed while it was re-embedded ({db}): the new copy would "
            "lose that change and was removed",
            hint=f"re-embed it again: kg-fuse index --model {name}"
                 f"{paths.data_dir_args(db.parent.parent)}")  # DIR/server/kg.sqlite3
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
