"""``kg-fuse unmount``: the one command that acts on the filesystem and on the server
(``--stop-server``), so it sits above both; they meet only over HTTP."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kg_fuse import paths
from kg_fuse.console import Command, option
from kg_fuse.exits import CommandError


def command() -> Command:
    """The command's row (built when the parser is, so the path its help names follows
    the environment)."""
    return Command(
        "unmount", help="unmount, also a mount whose process died",
        description="""Unmount MOUNTPOINT, a kg-fuse mount (also one whose process died:
        'transport endpoint is not connected'); any other filesystem mounted there is
        refused and left as it is. The embedded server keeps running, since other mounts
        may use it: add --stop-server to stop the server this mount uses (the one started
        on the --data-dir it was mounted with), or run 'kg-fuse server stop'. A shell
        inside the mount keeps it busy: cd out first.""",
        handler=cmd_unmount, options=[
            option("mountpoint", type=Path, help="where kg-fuse is mounted"),
            option("--stop-server", action="store_true",
                   help="also stop the embedded server this mount uses: the one started "
                        "on the --data-dir it was mounted with (a mount of another "
                        "server, or of a server it cannot tell, stops nothing)"),
            option("--data-dir", type=Path, metavar="DIR",
                   help="with --stop-server: the --data-dir the mount was made with; "
                        "another is refused (default: the mount's own, "
                        f"{paths.data_dir()} if it named none)"),
        ])


def cmd_unmount(args: argparse.Namespace) -> int:
    """Unmount; with ``--stop-server``, once unmounted, stop the embedded server the
    mount used, through its pid file (``server.lifecycle``: the standard library only).
    Which one is read before unmounting, from what the mount recorded: stopping the
    default server for a mount of another used to break the mounts of the default."""
    from kg_fuse.fs.mount_commands import recorded_server, unmount

    mountpoint = args.mountpoint.absolute()
    used = recorded_server(mountpoint) if args.stop_server else None
    code = unmount(mountpoint)
    if code != 0 or not args.stop_server:
        return code
    from kg_fuse.server import lifecycle

    return lifecycle.stop(_server_to_stop(mountpoint, used, args.data_dir))


def _server_to_stop(mountpoint: Path, used: tuple[str, Path | None] | None,
                    asked: Path | None) -> Path | None:
    """The data directory of the server the mount used, when it can tell; otherwise
    a :class:`CommandError` saying why nothing was stopped."""
    from kg_fuse.server import lifecycle

    stop_by_hand = ("stop the server yourself with kg-fuse server stop, adding the "
                    "--data-dir it was started with, if any")
    if used is None:
        raise CommandError(f"unmounted {mountpoint}, but it recorded no server: nothing "
                           "was stopped", hint=stop_by_hand)
    api_url, data_dir = used
    if asked is not None and not _same_dir(asked, data_dir):
        mounted_with = f"--data-dir {data_dir}" if data_dir else "the default data directory"
        raise CommandError(f"unmounted {mountpoint}, mounted with {mounted_with}, not "
                           f"--data-dir {asked}: nothing was stopped",
                           hint=f"kg-fuse server stop{paths.data_dir_args(asked)}")
    running = lifecycle.read_record(paths.server_pid_path(data_dir))
    if running is not None and running.api_url.rstrip("/") != api_url.rstrip("/"):
        where = paths.data_dir_args(data_dir).strip() or "the default data directory"
        raise CommandError(f"unmounted {mountpoint}; it used {api_url}, and the server on "
                           f"{where} runs at {running.api_url}: nothing was stopped",
                           hint=f"kg-fuse server stop{paths.data_dir_args(data_dir)} "
                                "stops that one")
    return data_dir


def _same_dir(a: Path, b: Path | None) -> bool:
    if b is None:
        return paths.is_default_data_dir(a)
    return os.path.realpath(a) == os.path.realpath(b)
