"""The ``kg-fuse eval`` subcommand (client side: needs only a reachable server).

The HTTP client is imported when the command runs, so ``kg-fuse --help`` stays quick.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kg_fuse.console import Command, add_commands, option
from kg_fuse.eval import sets
from kg_fuse.exits import install_hint
from kg_fuse.limits import DEFAULT_LIMIT

if TYPE_CHECKING:
    from kg_fuse.eval.runner import EvalRun


def _command() -> Command:
    names = ", ".join(sets.builtin_names())
    return Command(
        "eval", help="measure search quality: gibberish vs relevant queries at the default",
        description="Run a query set against a server and print, ADR-508 style, the best "
                    "scores of gibberish and relevant queries and what the default listing "
                    f"shows. Built-in sets: {names}.",
        handler=cmd_eval, options=[
            option("--set", dest="query_sets", action="append", metavar="NAME|FILE",
                   help=f"a built-in set ({names}) or a .toml file; repeat it to run "
                        "several sets against the same server (default: stdlib)"),
            option("--api-url", help="the API address (default: the embedded server's)"),
            option("--client-id", help="OAuth client id (use with --client-secret-file)"),
            option("--client-secret-file", help="file holding the OAuth client secret"),
            option("--limit", type=int, default=DEFAULT_LIMIT,
                   help=f"listing limit, as a query directory's (default {DEFAULT_LIMIT})"),
            option("--no-cut", action="store_true",
                   help="list everything above the default, as a written .meta/limit "
                        "does (without it, a listing stops where the mount's relevance "
                        "cut stops it)"),
            option("--json", action="store_true", help="print machine-readable JSON"),
            option("--plot", type=Path, metavar="FILE.png",
                   help="draw, per set, both score distributions with the default marked "
                        "and each query's listing size against its judged precision "
                        "(needs kg-fuse[plot])"),
        ])


def register(subparsers: argparse._SubParsersAction) -> None:
    add_commands(subparsers, [_command()])


def cmd_eval(args: argparse.Namespace) -> int:
    import trio

    from kg_fuse.client import KgApiClient, KgError, resolve_connection
    from kg_fuse.eval.runner import Evaluator

    refused = _refused(args)
    if refused is not None:
        print(f"kg-fuse eval: {refused}", file=sys.stderr)
        return 2
    try:
        qsets = [sets.load(name) for name in args.query_sets or ["stdlib"]]
        connection = resolve_connection(args.api_url, args.client_id, args.client_secret_file)
    except (sets.QuerySetError, KgError, OSError) as exc:
        print(f"kg-fuse eval: {exc}", file=sys.stderr)
        return 2

    async def run():
        client = KgApiClient(connection.api_url, connection.credentials, timeout=60.0)
        try:
            return [await Evaluator(client, qset, listing_limit=args.limit,
                                    cut=not args.no_cut).run()
                    for qset in qsets]
        finally:
            await client.aclose()

    try:
        results = trio.run(run)
    except KgError as exc:  # the runner's parallel searches fail as one (one_failure)
        print(f"kg-fuse eval: {connection.api_url}: {exc}", file=sys.stderr)
        return 1
    _report(args, results)
    return 0


def _refused(args: argparse.Namespace) -> str | None:
    """Why the options cannot run, if they cannot."""
    if not 1 <= args.limit <= 1000:
        return "--limit must be in 1..1000"
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return f"--plot needs matplotlib: {install_hint('plot')}"
    return None


def _report(args: argparse.Namespace, results: list[EvalRun]) -> None:
    """The runs as JSON or as text (with one table over several sets), and the plot."""
    from kg_fuse.eval import report

    if args.json:
        print(report.to_json(results[0]) if len(results) == 1 else report.many_to_json(results))
    else:
        print("\n\n".join(report.format_text(result) for result in results))
        if len(results) > 1:
            print("\n" + report.format_table(results))
    if args.plot is not None:
        from kg_fuse.eval.plot import plot

        plot(results, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
