"""``kg-fuse systemd install``: user units that bring the server and every mount back at login.

One unit for the embedded server and one per mountpoint (not a single "first mount"),
written to the user's systemd directory and enabled the way ``systemctl --user enable``
does it (a link in ``default.target.wants``), so it works before any user manager runs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import string
import sys
from pathlib import Path

import platformdirs

from kg_fuse.console import Command, add_commands, option
from kg_fuse.exits import UsageError

SERVER_UNIT = "kg-fuse-server.service"
MOUNT_PREFIX = "kg-fuse-mount-"
WANTS = "default.target.wants"
CARRIED_ENV = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "KG_API_URL")
_PLAIN = set(string.ascii_letters + string.digits + ":_.")


def unit_dir() -> Path:
    return Path(platformdirs.user_config_dir("systemd")) / "user"


def escape_path(path: Path) -> str:
    """``systemd-escape --path``: the unit-name form of an absolute path."""
    text = os.fsencode(str(path).strip("/")) or b"/"
    if text == b"/":
        return "-"
    out = []
    for i, byte in enumerate(text):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif char in _PLAIN and not (i == 0 and char == "."):
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def mount_unit_name(mountpoint: Path) -> str:
    return f"{MOUNT_PREFIX}{escape_path(mountpoint)}.service"


def _quote(arg: str) -> str:
    """One ExecStart argument, safe whatever it holds (spaces, quotes, %, $)."""
    escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("%", "%%").replace("$", "$$") + '"'


def _command(*args: str) -> str:
    return " ".join(_quote(a) for a in (sys.executable, "-m", "kg_fuse.cli", *args))


def _environment() -> list[str]:
    return [f"Environment={_quote(f'{k}={os.environ[k]}')}"
            for k in CARRIED_ENV if os.environ.get(k)]


def server_unit() -> str:
    return "\n".join([
        "[Unit]",
        "Description=kg-fuse embedded knowledge-graph server",
        "",
        "[Service]",
        "Type=simple",
        *_environment(),
        f"ExecStart={_command('serve')}",
        "Restart=on-failure",
        "RestartSec=5",
        "TimeoutStartSec=infinity",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def mount_unit(mountpoint: Path, extra: list[str], with_server: bool) -> str:
    after = [f"Wants={SERVER_UNIT}", f"After={SERVER_UNIT}"] if with_server else []
    return "\n".join([
        "[Unit]",
        f"Description=kg-fuse mount at {mountpoint}",
        *after,
        "",
        "[Service]",
        "Type=simple",
        *_environment(),
        # a mount whose process died leaves "transport endpoint is not connected": clear it
        f"ExecStartPre=-{_command('unmount', str(mountpoint))}",
        f"ExecStart={_command('mount', '--foreground', *extra, str(mountpoint))}",
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def install(mountpoints: list[Path], with_server: bool, mount_args: list[str],
            directory: Path, enable: bool) -> list[Path]:
    """Write (and enable) the units; returns the unit files written."""
    directory.mkdir(parents=True, exist_ok=True)
    units: dict[str, str] = {}
    if with_server:
        units[SERVER_UNIT] = server_unit()
    for mountpoint in mountpoints:
        units[mount_unit_name(mountpoint)] = mount_unit(mountpoint, mount_args, with_server)
    written = []
    for name, text in units.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
        if enable:
            link = directory / WANTS / name
            link.parent.mkdir(exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(Path("..") / name)
    return written


def uninstall(directory: Path) -> list[Path]:
    """Remove every kg-fuse unit and its enable link."""
    removed = []
    for path in sorted(directory.glob("kg-fuse-*.service")):
        (directory / WANTS / path.name).unlink(missing_ok=True)
        path.unlink()
        removed.append(path)
    return removed


def _commands() -> list[Command]:
    """``systemd install`` and ``systemd uninstall``, as data (built when the parser is, so
    the unit directory their help names follows the environment)."""
    return [Command(
        "systemd", help="write systemd user units: the server and every mount at login",
        description="""Write systemd user units so the embedded server and each mount come back at
        login: one unit per --mount (every one, not only the first), each enabled in
        default.target. Then run the printed systemctl command once.""",
        actions=[
            Command("install", help="write and enable the units",
                    description="Write and enable kg-fuse-server.service and one "
                                "kg-fuse-mount-PATH.service per --mount.",
                    handler=install_command, options=[
                        option("--mount", dest="mounts", type=Path, action="append",
                               default=[], metavar="MOUNTPOINT",
                               help="a mountpoint to mount at login (repeatable)"),
                        option("--api-url", default=None,
                               help="mount this API instead of the embedded server (no "
                                    "server unit)"),
                        option("--no-server", action="store_true",
                               help="do not write the embedded server's unit"),
                        option("--no-enable", action="store_true",
                               help="write the units without enabling them"),
                        option("--unit-dir", type=Path, default=None,
                               help=f"where to write the units (default: {unit_dir()})"),
                    ]),
            Command("uninstall", help="remove every kg-fuse unit",
                    description="Remove every kg-fuse-*.service unit and its enable link "
                                "(stop them first).",
                    handler=uninstall_command, options=[
                        option("--unit-dir", type=Path, default=None,
                               help=f"where the units are (default: {unit_dir()})"),
                    ]),
        ])]


def register(subparsers: argparse._SubParsersAction) -> None:
    add_commands(subparsers, _commands())


def install_command(args: argparse.Namespace) -> int:
    with_server = not (args.no_server or args.api_url)
    if not args.mounts and not with_server:
        raise UsageError("nothing to install", hint="add --mount MOUNTPOINT")
    mounts = []
    for mountpoint in args.mounts:
        absolute = mountpoint.expanduser().absolute()
        if absolute.exists() and not absolute.is_dir():
            raise UsageError(f"{absolute} is not a directory",
                             hint="give the directory to mount at")
        absolute.mkdir(parents=True, exist_ok=True)
        mounts.append(absolute)
    extra = ["--api-url", args.api_url] if args.api_url else []
    directory = args.unit_dir or unit_dir()
    written = install(mounts, with_server, extra, directory, enable=not args.no_enable)
    for path in written:
        print(f"wrote {path}")
    names = " ".join(shlex.quote(p.name) for p in written)
    print(f"start them now with:  systemctl --user daemon-reload && "
          f"systemctl --user start {names}")
    return 0


def uninstall_command(args: argparse.Namespace) -> int:
    for path in uninstall(args.unit_dir or unit_dir()):
        print(f"removed {path}")
    print("then: systemctl --user daemon-reload")
    return 0
