"""The store a server command works on, made ready: its inputs checked, kept private, a
re-embedded copy put in place (or made, for ``index --model``), opened with its model
checked, then built.

The commands (:mod:`.server_commands`) say what to do and what to print; this says how a
store gets ready for them, from their arguments, in the words of the command line (its
errors name ``--modules``, ``--ingest``, ``--data-dir``). The work itself is
:mod:`.startup`'s. Like the commands, it imports nothing heavy at module level: the FUSE
client imports them to build its parser, and ``server start`` checks its inputs here
without loading the model.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from kg_fuse import owner_only, paths
from kg_fuse.exits import UsageError
from kg_fuse.server import lifecycle

if TYPE_CHECKING:
    from kg_fuse.server.knowledge.graph import KnowledgeGraph
    from kg_fuse.server.store_model.record import ModelRecord

log = logging.getLogger(__name__)

MODULES_HINT = "--modules takes standard-library modules written in Python, e.g. gzip,json"


def check_inputs(args: argparse.Namespace) -> None:
    """Refuse a bad --model (or a model not installed), --modules or --ingest before
    opening (or creating) a store, and before ``server start`` detaches."""
    from kg_fuse.server.embedding.models import resolve

    resolve(args.model)
    if args.modules and args.corpus == "stdlib":
        from kg_fuse.server.corpus.stdlib import discover_modules

        unknown = sorted(set(args.modules) - set(discover_modules()))
        if unknown:
            raise UsageError(f"--modules: not standard-library source modules: "
                             f"{', '.join(unknown)}", hint=MODULES_HINT)
    for folder in args.ingest:
        if not folder.is_dir():
            raise UsageError(f"--ingest {folder}: not a directory",
                             hint="give a folder of Markdown or text files")


def make_private(data_dir: Path | None, log_file: Path | None = None) -> None:
    """Keep the store and the logs from other local users (an install made before this
    was kept is fixed here, and the log says so once)."""
    files = paths.server_private_files(data_dir) + ([log_file] if log_file else [])
    owner_only.log_fixed(owner_only.private_dirs(paths.server_private_dirs(data_dir))
                      + owner_only.private_files(files))


def remove_interrupted(data_dir: Path | None) -> None:
    """What a killed ``index --model`` left beside the store, and a killed ``model add``
    among the models, removed (each logged) by the next command that owns them."""
    from kg_fuse.server.embedding.leftovers import remove_interrupted_models
    from kg_fuse.server.startup.reembed import remove_interrupted as remove_reembed

    remove_reembed(paths.server_db_path(data_dir))
    remove_interrupted_models()


def put_reembedded_in_place(data_dir: Path | None, model_name: str | None) -> None:
    """At ``serve``: the store re-embedded while the last server ran takes the old one's
    place before anything opens it (:func:`.startup.reembed.swap_in_ready`). One the
    store outgrew since (an ingest before the restart) is re-embedded now, when the
    server is asked for its model (the restart ``index`` printed); otherwise the store
    serves as it is, and the log says how to re-embed it."""
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.embedding.models import resolve
    from kg_fuse.server.startup import reembed

    db = paths.server_db_path(data_dir)
    try:
        if reembed.swap_in_ready(db):
            log.info("serving the store re-embedded while the last server ran")
    except reembed.StaleCopy as stale:
        if model_name != stale.model:
            log.warning("%s", stale.line())
            return
        log.warning("%s; re-embedding it now, before serving (minutes)", stale.message)
        embedder = Embedder(resolve(model_name))
        embedder.load()
        reembed.reembed(db, embedder, server_running=False)


def reembed_if_asked(args: argparse.Namespace) -> lifecycle.ServerRecord | None:
    """``index --model NAME`` on a store another model embedded: re-embed it (all or
    nothing; :mod:`.startup.reembed`). Returns the running server that must be restarted
    to serve it (None: with no server running, the new store is in place)."""
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.embedding.models import resolve
    from kg_fuse.server.startup import reembed
    from kg_fuse.server.store_model import record as records

    db = paths.server_db_path(args.data_dir)
    running = lifecycle.read_record(paths.server_pid_path(args.data_dir))
    if running is None:
        try:
            if reembed.swap_in_ready(db):
                log.info("a store re-embedded earlier is in place")
        except reembed.StaleCopy as stale:  # re-embedded below if this model is asked
            log.warning("%s", stale.message)
    if args.model is None or not db.exists():
        return None
    spec = resolve(args.model)
    try:
        held = records.read_at(db)
    except records.RecordUnreadable as exc:
        log.warning("%s: re-embedding it with %s", exc.message, spec.name)
    else:
        if held is None or held.same_model(records.ModelRecord.of(spec)):
            return None  # a new store, a store of this model, or one from before the record
    embedder = Embedder(spec)
    embedder.load()
    reembed.reembed(db, embedder, server_running=running is not None)
    return running


def open_graph(data_dir: Path | None, model_name: str | None = None) -> KnowledgeGraph:
    """The store and the model to embed with: ``model_name``, or the one the store's
    vectors were made by (the default for a new store). A store another model embedded
    is refused, naming the command that re-embeds it (:mod:`.store_model.owner`)."""
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.embedding.models import resolve
    from kg_fuse.server.knowledge.graph import KnowledgeGraph
    from kg_fuse.server.storage.store import Store
    from kg_fuse.server.store_model.owner import chosen

    if model_name is not None:
        resolve(model_name)  # an unknown or missing model: one line, before the store
    store = Store(paths.server_db_path(data_dir))
    try:
        return KnowledgeGraph(store, Embedder(chosen(store, model_name)))
    except BaseException:
        store.close()
        raise


def build(graph: KnowledgeGraph, args: argparse.Namespace) -> None:
    """Build what the store lacks from the corpus options in ``args``, load it, calibrate
    if needed (:func:`.startup.prepare.prepare`)."""
    from kg_fuse.server.startup.prepare import prepare

    try:
        prepare(graph, corpus=args.corpus, modules=args.modules,
                ingest=list(args.ingest), ontology=args.ontology, progress=True)
    except ValueError as exc:  # --modules naming something the corpus cannot read
        raise UsageError(str(exc), hint=MODULES_HINT) from None


def record_at(db: Path) -> ModelRecord | None:
    """What the store file at ``db`` records of its model, read without opening it."""
    from kg_fuse.server.store_model.record import read_at

    return read_at(db)


def reembedded_record(data_dir: Path | None) -> ModelRecord | None:
    """The model record of the re-embedded copy waiting for the server's next start."""
    from kg_fuse.server.startup.reembed import ready_path

    ready = ready_path(paths.server_db_path(data_dir))
    return record_at(ready) if ready.exists() else None
