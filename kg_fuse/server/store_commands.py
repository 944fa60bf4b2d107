"""``kg-fuse index`` and ``kg-fuse calibrate``: commands on a data directory's store that
serve nothing (``kg-fuse serve`` and ``server start``, above this, serve it). They open the
store through :mod:`.open_store` and print what a user acts on: the store's size, its
default, its model's grade."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from kg_fuse import console, paths
from kg_fuse.exits import CommandError
from kg_fuse.server import open_store

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging() -> None:
    """INFO and up on stderr: a build's progress and what it measured."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=LOG_FORMAT)


def index_command(args: argparse.Namespace) -> int:
    """Build or refresh the store (with a progress bar) without serving."""
    open_store.check_inputs(args)
    setup_logging()
    open_store.make_private(args.data_dir)
    open_store.remove_interrupted(args.data_dir)
    with console.interrupted_by_signals():
        running = open_store.reembed_if_asked(args)
    if running is not None:
        restart = running.restart_command(args.data_dir, model=args.model)
        print(f"re-embedded with {args.model}; the running server still serves the old "
              f"store: restart it to serve the new one: {restart}")
        _print_grade(open_store.reembedded_record(args.data_dir))
        return 0
    graph = open_store.open_graph(args.data_dir, args.model)
    try:
        open_store.build(graph, args)
        print(f"index ready: {len(graph.index)} concepts in {graph.store.path} "
              f"(default threshold {graph.default_threshold():.2f})")
        _print_grade(graph.model.record)
    finally:
        graph.store.close()
    return 0


def _print_grade(record: Any) -> None:
    """The store's model and its grade (a :class:`~.store_model.record.ModelRecord`, or
    None), and the warning a weak one gets, on stderr."""
    if record is None:
        return
    print(f"model {record.graded()}")
    if record.measured is not None and (warning := record.measured.grade.warning(
            record.name)) is not None:
        print(f"kg-fuse: warning: {warning}", file=sys.stderr)


def _stored_report(db: Path) -> str | None:
    """The calibration table the store keeps, read from its file alone (no model)."""
    import json

    from kg_fuse.server.storage.store import read_setting_at
    from kg_fuse.server.store_model import record as records
    from kg_fuse.server.threshold.calibrate import CalibrationReport, format_report
    from kg_fuse.server.threshold.keys import CALIBRATION_KEY

    raw = read_setting_at(db, CALIBRATION_KEY)
    if raw is None:
        return None
    fields = json.loads(raw)
    fields["probes"] = [tuple(p) for p in fields.get("probes", [])]
    record = records.read_at(db)
    return format_report(CalibrationReport(**fields),
                         "model not recorded" if record is None else record.name)


def calibrate_command(args: argparse.Namespace) -> int:
    """Print the calibration table for the built store; ``--write`` stores the default."""
    db = paths.server_db_path(args.data_dir)
    data_dir = paths.data_dir_argv(args.data_dir)
    if not db.exists():
        raise CommandError(f"no store at {db}",
                           hint=f"build it first: {paths.command_line('index', *data_dir)}")
    if args.show:
        report_text = _stored_report(db)
        if report_text is None:
            raise CommandError("the store holds no calibration yet",
                               hint=paths.command_line("calibrate", "--write", *data_dir))
        print(report_text)
        _print_grade(open_store.record_at(db))
        return 0
    setup_logging()
    from kg_fuse.server.threshold.calibrate import format_report

    graph = open_store.open_graph(args.data_dir)
    try:
        graph.reload_index()
        if not len(graph.index):
            raise CommandError("the store has no embedded concepts",
                               hint=paths.command_line("index", *data_dir))
        graph.model.measure()  # a store from before the grade: measured and recorded now
        report = graph.threshold.calibrate(write=args.write)
        print(format_report(report, graph.embedder.name))
        _print_grade(graph.model.record)
        if args.write:
            print(f"stored: search_default_similarity_threshold = {report.default:.2f}")
    finally:
        graph.store.close()
    return 0
