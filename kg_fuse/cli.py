"""The ``kg-fuse`` command: the filesystem's commands plus, when installed, the server's."""

from __future__ import annotations

import argparse
import sys

from kg_fuse.eval import commands as eval_commands
from kg_fuse.fs import commands as fs_commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kg-fuse", description="Saved semantic searches as directories.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fs_commands.register(subparsers)
    eval_commands.register(subparsers)
    try:
        from kg_fuse.server import commands as server_commands
    except ImportError:
        missing = subparsers.add_parser("serve", help="(needs: pip install 'kg-fuse[server]')")
        missing.set_defaults(func=lambda _args: _server_missing())
    else:
        server_commands.register(subparsers)
    return parser


def _server_missing() -> int:
    print("kg-fuse: the embedded server is not installed: pip install 'kg-fuse[server]'",
          file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
