"""The ``kg-fuse`` command: the filesystem's commands plus the server's.

Every failure leaves as one line on stderr and an exit code from :mod:`kg_fuse.exits`
(see :mod:`kg_fuse.console`); no input produces a traceback.
"""

from __future__ import annotations

import argparse
import sys

from kg_fuse import exits
from kg_fuse.console import Parser, VersionAction, run


def build_parser() -> argparse.ArgumentParser:
    from kg_fuse import systemd, unmount
    from kg_fuse.eval import commands as eval_commands
    from kg_fuse.fs import mount_commands as fs_commands
    from kg_fuse.server import model_commands, server_commands

    parser = Parser(
        prog="kg-fuse",
        description="Saved semantic searches as directories: mount a knowledge graph, "
                    "mkdir a query, ls its results.\n\n"
                    "Quick start:  kg-fuse server start && kg-fuse mount ~/kg\n"
                    "Stop:         kg-fuse unmount ~/kg && kg-fuse server stop",
        epilog=exits.EXIT_CODES_HELP + ".  'kg-fuse COMMAND --help' explains each command.")
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       title="commands")
    fs_commands.register(subparsers, unmount.command())
    server_commands.register(subparsers)
    model_commands.register(subparsers)
    eval_commands.register(subparsers)
    systemd.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
