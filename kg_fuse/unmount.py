"""``kg-fuse unmount``: the one command that acts on the filesystem and on the server
(``--stop-server``), so it sits above both; they meet only over HTTP."""

from __future__ import annotations

import argparse
from pathlib import Path

from kg_fuse import paths
from kg_fuse.console import Command, option


def command() -> Command:
    """The command's row (built when the parser is, so the path its help names follows
    the environment)."""
    return Command(
        "unmount", help="unmount, also a mount whose process died",
        description="""Unmount MOUNTPOINT, a kg-fuse mount (also one whose process died:
        'transport endpoint is not connected'); any other filesystem mounted there is
        refused and left as it is. The embedded server keeps running, since other mounts
        may use it: add --stop-server, or run 'kg-fuse server stop'. A shell inside the
        mount keeps it busy: cd out first.""",
        handler=cmd_unmount, options=[
            option("mountpoint", type=Path, help="where kg-fuse is mounted"),
            option("--stop-server", action="store_true",
                   help="also stop the embedded server started on this machine"),
            option("--data-dir", type=Path, metavar="DIR",
                   help="with --stop-server: stop the server started with this "
                        f"--data-dir (default: the one on {paths.data_dir()})"),
        ])


def cmd_unmount(args: argparse.Namespace) -> int:
    """Unmount; with ``--stop-server``, once unmounted, stop the embedded server through
    its pid file (``server.lifecycle``: the standard library only)."""
    from kg_fuse.fs.mount_commands import unmount

    code = unmount(args.mountpoint.absolute())
    if code != 0 or not args.stop_server:
        return code
    from kg_fuse.server import lifecycle

    return lifecycle.stop(args.data_dir)
