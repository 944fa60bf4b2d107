"""``kg-fuse systemd install``: user units that bring the server and every mount back at login.

One unit for the embedded server and one per mountpoint (not a single "first mount"),
written to the user's systemd directory and enabled the way ``systemctl --user enable``
does it (a link in ``default.target.wants``), so it works before any user manager runs.

A unit runs without the user's shell, so it carries what the user ran with: the serve
options given to ``install`` (port, data directory, corpus, ...), every path absolute,
and the environment kg-fuse reads (the XDG folders, the model's cache among them, and
every ``KG_*`` variable). The client secret is never written into a unit: it goes to a
private file the mount units name with ``--client-secret-file``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import string
import sys
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from kg_fuse import owner_only, paths
from kg_fuse.console import Command, absolute_paths, add_commands, option
from kg_fuse.exits import UsageError
from kg_fuse.server import server_commands

SERVER_UNIT = "kg-fuse-server.service"
MOUNT_PREFIX = "kg-fuse-mount-"
WANTS = "default.target.wants"
#: Carried into the units when set, with every ``KG_*`` variable but the client's pair.
CARRIED_XDG = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
CLIENT_ENV = ("KG_CLIENT_ID", "KG_CLIENT_SECRET")
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


def carried_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What the units carry of ``environ``: where kg-fuse's folders are (the model is
    cached under ``XDG_CACHE_HOME``) and every ``KG_*`` setting (``KG_WORDNET_DIR``,
    ``KG_API_URL``, ...), but the client's id and secret (see :func:`client_options`)."""
    return {name: value for name, value in sorted(environ.items()) if value and (
        name in CARRIED_XDG or (name.startswith("KG_") and name not in CLIENT_ENV))}


def client_options(environ: Mapping[str, str], secret_file: Path) -> list[str]:
    """``KG_CLIENT_ID`` and ``KG_CLIENT_SECRET`` as the mount's ``--client-id`` and
    ``--client-secret-file`` (the secret written to ``secret_file``, 0600): a unit file
    is no place for a secret. Nothing when they are not both set."""
    client_id, secret = (environ.get(name) for name in CLIENT_ENV)
    if not (client_id and secret):
        return []
    owner_only.create_dir(secret_file.parent)
    with open(owner_only.open_private(secret_file, append=False), "w", encoding="utf-8") as f:
        f.write(secret + "\n")
    return ["--client-id", client_id, "--client-secret-file", str(secret_file)]


def _environment(environ: Mapping[str, str]) -> list[str]:
    return [f"Environment={_quote(f'{name}={value}')}"
            for name, value in carried_environment(environ).items()]


def server_unit(serve_argv: list[str], environ: Mapping[str, str]) -> str:
    return "\n".join([
        "[Unit]",
        "Description=kg-fuse embedded knowledge-graph server",
        "",
        "[Service]",
        "Type=simple",
        *_environment(environ),
        f"ExecStart={_command('serve', *serve_argv)}",
        "Restart=on-failure",
        "RestartSec=5",
        "TimeoutStartSec=infinity",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def mount_unit(mountpoint: Path, extra: list[str], with_server: bool,
               environ: Mapping[str, str]) -> str:
    after = [f"Wants={SERVER_UNIT}", f"After={SERVER_UNIT}"] if with_server else []
    return "\n".join([
        "[Unit]",
        f"Description=kg-fuse mount at {mountpoint}",
        *after,
        "",
        "[Service]",
        "Type=simple",
        *_environment(environ),
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


def install(mountpoints: list[Path], serve_argv: list[str] | None, mount_args: list[str],
            directory: Path, enable: bool, environ: Mapping[str, str]) -> list[Path]:
    """Write (and enable) the units: the server's when ``serve_argv`` is given, one per
    mountpoint; returns the unit files written."""
    directory.mkdir(parents=True, exist_ok=True)
    units: dict[str, str] = {}
    if serve_argv is not None:
        units[SERVER_UNIT] = server_unit(serve_argv, environ)
    for mountpoint in mountpoints:
        units[mount_unit_name(mountpoint)] = mount_unit(mountpoint, mount_args,
                                                        serve_argv is not None, environ)
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
                    description="""Write and enable kg-fuse-server.service and one
                    kg-fuse-mount-PATH.service per --mount. The server unit runs 'kg-fuse
                    serve' with the serve options given here, and every unit carries the XDG
                    folders and KG_* variables set now; relative paths are made absolute
                    (symlinks resolved, as 'kg-fuse mount' does).""",
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
                        *server_commands.serve_options(log_default="the journal"),
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


def secret_file() -> Path:
    """Where ``install`` keeps the client secret the mount units read (0600)."""
    return paths.config_dir() / "systemd-client-secret"


def _mount_args(args: argparse.Namespace, with_server: bool,
                environ: Mapping[str, str]) -> list[str]:
    """The mount units' options: the server they mount, and as whom. With the server's
    unit, its address is named, so a credentials file left by an earlier server on
    another port is not followed (the mount restarts until the server rewrote it)."""
    api_url = args.api_url
    if api_url is None and with_server and not environ.get("KG_API_URL") and args.port:
        api_url = server_commands.local_api_url(args.host, args.port)
    extra = ["--api-url", api_url] if api_url else []
    if not args.api_url and not paths.is_default_data_dir(args.data_dir):
        extra += ["--data-dir", str(args.data_dir)]
    return extra + client_options(environ, secret_file())


def install_command(args: argparse.Namespace) -> int:
    with_server = not (args.no_server or args.api_url)
    if not args.mounts and not with_server:
        raise UsageError("nothing to install", hint="add --mount MOUNTPOINT")
    args.mounts = [mountpoint.expanduser() for mountpoint in args.mounts]
    absolute_paths(args)  # a unit runs in no directory of the user's
    serve = _serve_argv(args) if with_server else None
    _make_mountpoints(args.mounts)
    environ = dict(os.environ)
    directory = args.unit_dir or unit_dir()
    written = install(args.mounts, serve, _mount_args(args, with_server, environ), directory,
                      enable=not args.no_enable, environ=environ)
    _say_written(written, args.mounts)
    return 0


def _serve_argv(args: argparse.Namespace) -> list[str]:
    """The server unit's command: ``serve`` with the options given, and its log file."""
    serve = server_commands.serve_argv(args)
    if args.log_file is not None:
        serve += ["--log-file", str(args.log_file)]
    return serve


def _make_mountpoints(mountpoints: list[Path]) -> None:
    """Each mountpoint a directory, made if missing."""
    for mountpoint in mountpoints:
        if mountpoint.exists() and not mountpoint.is_dir():
            raise UsageError(f"{mountpoint} is not a directory",
                             hint="give the directory to mount at")
        mountpoint.mkdir(parents=True, exist_ok=True)


def _say_written(written: list[Path], mountpoints: list[Path]) -> None:
    """Which units were written (and where each mount's mounts), and how to start them."""
    mounted_at = {mount_unit_name(m): m for m in mountpoints}
    for path in written:
        at = f" (mounts {mounted_at[path.name]})" if path.name in mounted_at else ""
        print(f"wrote {path}{at}")
    names = " ".join(shlex.quote(p.name) for p in written)
    print(f"start them now with:  systemctl --user daemon-reload && "
          f"systemctl --user start {names}")


def uninstall_command(args: argparse.Namespace) -> int:
    for path in uninstall(args.unit_dir or unit_dir()):
        print(f"removed {path}")
    if secret_file().exists():
        secret_file().unlink()
        print(f"removed {secret_file()}")
    print("then: systemctl --user daemon-reload")
    return 0
