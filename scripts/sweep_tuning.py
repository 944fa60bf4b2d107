#!/usr/bin/env python3
"""Sweep tuned numbers of the search and print the eval figures at each value.
Prints figures; asserts nothing.

    .venv/bin/python scripts/sweep_tuning.py STORE.sqlite3 --set stdlib --set heldout \\
        KEYWORD_WEIGHT=0.2,0.3,0.4 [MAX_BRIDGES=4,6,8 ...]

``STORE`` is a built store (``kg-fuse index``, then ``DATA_DIR/server/kg.sqlite3``); the
sets are ``kg-fuse eval``'s, over that store's corpus. Every entry of
:mod:`kg_fuse.server.search.tuning` can be swept by its name. Each value runs in a child
process over its own copy of the store, where the table's entry is set before any module
that reads it is imported, so its aliases (``understand.TYPO_PENALTY``) and what is made
from them take the new value; an entry a model's row of ``BY_MODEL`` moves is swept
for that model too (its row's value is dropped). The child then does what a server does
at a new value: it recalibrates the default over its own corpus, and runs each set
through the real app in-process (``httpx.ASGITransport``) with ``kg-fuse eval``'s own
runner. A row's figures are therefore the ones ``kg-fuse eval`` prints against a server
running that value: the expected concept listed (at the mount's relevance cut), the
median listing, gibberish that lists anything, judged precision. Build-time numbers
(what a concept's views are made of) need the store rebuilt and are not swept here.

The shipped value is always measured too, in the same run (marked ``*``), so each row
reads against it. The tuning table says which of these figures chose each number.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kg_fuse.server import search  # noqa: E402
from kg_fuse.server.search import tuning  # noqa: E402

API_URL = "http://kg.sweep"  # never resolved: the transport is the app itself
#: The packages whose modules read the table when imported: the search's and the
#: threshold rules'.
READERS = (f"{search.__name__}.", "kg_fuse.server.threshold.")


def set_tuned(name: str, value: object) -> None:
    """The table's entry ``name`` set to ``value`` in this process, before any module of
    the search is imported: their aliases, default arguments and anything derived from
    the value (an SQL fragment) are then made from the new value, as in a server
    shipped with it."""
    loaded = [m for m in sys.modules if m.startswith(READERS) and m != tuning.__name__]
    if loaded:
        raise RuntimeError(f"set {name} before importing {', '.join(loaded)}")
    entry = getattr(tuning, name)
    if not isinstance(entry, tuning.Tuned):
        raise SystemExit(f"{name} is not an entry of the tuning table")
    setattr(tuning, name, dataclasses.replace(entry, value=value))
    if name in tuning.PER_MODEL:  # the swept value holds for the store's model too
        rows = {model: {k: v for k, v in moved.items() if k != name}
                for model, moved in tuning.BY_MODEL.value.items()}
        tuning.BY_MODEL = dataclasses.replace(tuning.BY_MODEL, value=rows)


def run_child(store: Path, set_names: list[str], name: str | None, value: object,
              fixed: Sequence[tuple[str, object]] = ()) -> dict:
    """Recalibrate and run the sets at one value (in a child process), after the
    ``fixed`` entries are set."""
    for fixed_name, fixed_value in fixed:
        set_tuned(fixed_name, fixed_value)
    if name:
        set_tuned(name, value)
    import httpx
    import trio

    from kg_fuse.client.api import KgApiClient
    from kg_fuse.client.credentials import Credentials
    from kg_fuse.eval import report, sets
    from kg_fuse.eval.runner import Evaluator
    from kg_fuse.server.api.app import create_app
    from kg_fuse.server.api.auth import ensure_credentials, token_ttl
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.knowledge.graph import KnowledgeGraph
    from kg_fuse.server.storage.store import Store
    from kg_fuse.server.store_model.owner import chosen

    opened = Store(store)
    graph = KnowledgeGraph(opened, Embedder(chosen(opened, None)))  # the store's own model
    graph.reload_index()
    default = graph.threshold.calibrate(write=True).default
    secrets = ensure_credentials(graph.store, store.parent / "credentials.json", API_URL)
    user = secrets["user"]
    app = create_app(graph, token_ttl(None))

    async def evaluate() -> dict:
        client = KgApiClient(API_URL, Credentials(user["client_id"], user["client_secret"],
                                                  "sweep"),
                             timeout=60.0, transport=httpx.ASGITransport(app=app))
        try:
            return {set_name: report.summary(await Evaluator(client, sets.load(set_name)).run())
                    for set_name in set_names}
        finally:
            await client.aclose()

    return {"default": default, "sets": trio.run(evaluate)}


def _cell(figures: dict) -> str:
    judged = figures["judged"]
    precision = ""
    if judged and judged["precision"] is not None:
        precision = f" P {judged['precision']:.2f}"
    size = figures["listing_size"]["median"] or 0.0
    return (f"{figures['relevant_listed_pct']:5.1f}% p50 {size:4.1f}"
            f" gib {figures['gibberish_listing_anything']}{precision}")


def _entry(ap: argparse.ArgumentParser, item: str) -> tuple[str, object]:
    """``NAME=V`` read as a table entry's name and a Python literal."""
    name, _, value = item.partition("=")
    if not isinstance(getattr(tuning, name, None), tuning.Tuned) or not value:
        ap.error(f"--with {item}: want NAME=V with NAME an entry of the tuning table")
    return name, ast.literal_eval(value)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path, help="a built store (kg.sqlite3); never written")
    ap.add_argument("--set", dest="sets", action="append", required=True,
                    help="an eval set over that store's corpus (repeatable)")
    ap.add_argument("sweeps", nargs="*", metavar="NAME=V1,V2",
                    help="a tuning entry and the values to try (Python literals)")
    ap.add_argument("--with", dest="fixed", action="append", default=[],
                    metavar="NAME=V", help="an entry set to V in every row, the "
                    "reference row too (to sweep one entry with others moved; repeatable)")
    ap.add_argument("--child", nargs=2, metavar=("NAME", "VALUE"), help=argparse.SUPPRESS)
    args = ap.parse_intermixed_args()
    fixed = [_entry(ap, item) for item in args.fixed]
    if args.child:
        name, value = args.child
        print(json.dumps(run_child(args.store, args.sets, name or None,
                                   ast.literal_eval(value) if name else None, fixed)))
        return 0
    plan: list[tuple[str, str]] = [("", "")]
    for sweep in args.sweeps:
        name, _, values = sweep.partition("=")
        shipped = getattr(tuning, name, None)
        if not isinstance(shipped, tuning.Tuned) or not values:
            ap.error(f"{sweep}: want NAME=V1,V2 with NAME an entry of the tuning table")
        literal = ast.literal_eval(f"[{values}]")
        # the table's value is the reference row's, except where a model's row moves it
        plan += [(name, repr(v)) for v in literal
                 if v != shipped.value or name in tuning.PER_MODEL]
    print(f"{'value':32} {'default':>7}  " + "  ".join(f"{s:34}" for s in args.sets))
    with tempfile.TemporaryDirectory(prefix="kg-sweep-") as work:
        for i, (name, value) in enumerate(plan):
            store = Path(work) / str(i) / "kg.sqlite3"
            store.parent.mkdir()
            shutil.copyfile(args.store, store)
            command = [sys.executable, __file__, str(store), "--child", name, value]
            command += [arg for s in args.sets for arg in ("--set", s)]
            command += [arg for item in args.fixed for arg in ("--with", item)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            result = json.loads(out.splitlines()[-1])
            label = f"{name}={value}" if name else "* as shipped" + (" (with)" if fixed else "")
            print(f"{label:32} {result['default']:7.2f}  "
                  + "  ".join(f"{_cell(result['sets'][s]):34}" for s in args.sets), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
