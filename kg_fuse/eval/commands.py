"""The ``kg-fuse eval`` subcommand (client side: needs only a reachable server).

The HTTP client is imported when the command runs, so ``kg-fuse --help`` stays quick.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kg_fuse.console import Command, add_commands, check_client_pair, option
from kg_fuse.eval import sets
from kg_fuse.exits import CommandError, UsageError, install_hint
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
            option("--client-secret-file",
                   help="file holding the OAuth client secret (use with --client-id)"),
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

    _refuse_options(args)
    check_client_pair(args.client_id, args.client_secret_file)
    try:
        qsets = [sets.load(name) for name in args.query_sets or ["stdlib"]]
    except sets.QuerySetError as exc:
        raise UsageError(f"eval: {exc}", hint="--set takes "
                         f"{', '.join(sets.builtin_names())} or a .toml file") from None
    try:
        connection = resolve_connection(args.api_url, args.client_id, args.client_secret_file)
    except OSError as exc:  # the secret file given cannot be read: the input is wrong
        raise UsageError(f"eval: cannot read the client secret: {exc.strerror}: "
                         f"{exc.filename}",
                         hint="--client-secret-file names a file holding the secret") from None
    except KgError as exc:  # no server to measure, yet: the command failed (exit 1)
        raise CommandError(f"eval: {exc}",
                           hint="kg-fuse server start, or pass --api-url") from None

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
        raise CommandError(f"eval: {connection.api_url}: {exc}",
                           hint="kg-fuse server status says whether it runs") from None
    _report(args, results)
    return 0


def _refuse_options(args: argparse.Namespace) -> None:
    """Refuse options that cannot run, before asking the server anything."""
    if not 1 <= args.limit <= 1000:
        raise UsageError(f"eval: --limit {args.limit}: it must be in 1..1000",
                         hint=f"--limit {DEFAULT_LIMIT} is the default")
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("eval: --plot needs matplotlib",
                               hint=install_hint("plot")) from None


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
