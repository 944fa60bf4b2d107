"""Where kg-fuse keeps its files, in the platform's usual directories.

Everything is derived from platformdirs, so the XDG variables (``XDG_DATA_HOME``,
``XDG_CONFIG_HOME``) relocate it all; the tests rely on that for isolation.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path

import platformdirs

APP_NAME = "kg-fuse"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_API_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME))


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME))


def server_dir(base: Path | None = None) -> Path:
    """The embedded server's home: its SQLite store lives here."""
    return (base or data_dir()) / "server"


def server_db_path(base: Path | None = None) -> Path:
    return server_dir(base) / "kg.sqlite3"


def server_pid_path(base: Path | None = None) -> Path:
    """Written by a running ``kg-fuse serve`` on this store; ``kg-fuse server stop`` reads it."""
    return server_dir(base) / "server.pid"


def server_log_path(base: Path | None = None) -> Path:
    """The log of a server started in the background (``kg-fuse server start``)."""
    return server_dir(base) / "server.log"


def server_private_dirs(base: Path | None = None) -> list[Path]:
    """The server's folders, kept 0700 (see :mod:`kg_fuse.owner_only`): its store, pid file
    and log, and the credentials' folder. A ``--data-dir`` of the user's choosing is
    theirs: only its ``server`` folder is kg-fuse's."""
    owned = [] if base is not None else [data_dir()]
    return [*owned, server_dir(base), config_dir()]


def server_private_files(base: Path | None = None) -> list[Path]:
    """The server's files, kept 0600: the store (with its WAL and shared memory), its log,
    pid file and credentials."""
    return [*sqlite_files(server_db_path(base)), server_log_path(base),
            server_pid_path(base), server_credentials_path(base)]


def sqlite_files(db: Path) -> list[Path]:
    """A SQLite store's file and the two SQLite keeps beside it in WAL mode."""
    return [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]


def is_default_data_dir(base: Path | None) -> bool:
    """Whether ``base`` (a ``--data-dir``, or None) is the default data directory."""
    return base is None or os.path.realpath(base) == os.path.realpath(data_dir())


def server_credentials_path(base: Path | None = None) -> Path:
    """The 0600 file where the embedded server on ``base`` writes its clients'
    credentials: one per data directory, so two servers never take each other's. The
    default data directory's stays in the config folder, where existing installs and the
    platform's own client find it."""
    if is_default_data_dir(base):
        return config_dir() / "server-credentials.json"
    return server_dir(base) / "server-credentials.json"


def data_dir_argv(base: Path | None) -> list[str]:
    """``["--data-dir", DIR]`` (absolute) for a command to name the server on ``base``;
    nothing for the default data directory."""
    if base is None or is_default_data_dir(base):
        return []
    return ["--data-dir", os.path.abspath(base)]


def data_dir_args(base: Path | None) -> str:
    """`` --data-dir DIR`` (absolute, quoted for a shell) for a command to name the
    server on ``base``; nothing for the default data directory."""
    argv = data_dir_argv(base)
    return f" {shlex.join(argv)}" if argv else ""


def command_line(*argv: str | os.PathLike[str]) -> str:
    """``kg-fuse ARGV...`` as a shell reads it back (quoted: paths with spaces), for a
    command kg-fuse prints for its user to paste."""
    return shlex.join(["kg-fuse", *map(os.fspath, argv)])


def platform_cli_config_path() -> Path:
    """The platform's own CLI keeps its API address and OAuth client here."""
    return Path(os.path.expanduser("~")) / ".config" / "kg" / "config.json"


def mount_state_dir(mountpoint: str | os.PathLike[str]) -> Path:
    """Per-mountpoint state (saved queries), keyed by the mountpoint's absolute path."""
    absolute = os.path.abspath(os.fspath(mountpoint))
    digest = hashlib.sha256(os.fsencode(absolute)).hexdigest()[:16]
    readable = "".join(c if c.isalnum() else "_" for c in absolute.strip("/"))[-48:]
    return data_dir() / "mounts" / f"{readable}-{digest}"


def mount_private_dirs(mountpoint: str | os.PathLike[str]) -> list[Path]:
    """A mount's folders, kept 0700: its saved queries and (by default) its log."""
    return [data_dir(), data_dir() / "mounts", mount_state_dir(mountpoint)]


def mount_server_path(mountpoint: str | os.PathLike[str]) -> Path:
    """Which server the mount now at ``mountpoint`` uses (its address and the
    ``--data-dir`` it was mounted with): written at each mount, read by ``kg-fuse
    unmount --stop-server``, so it stops that server and no other."""
    return mount_state_dir(mountpoint) / "server.json"


def mount_log_path(mountpoint: str | os.PathLike[str]) -> Path:
    """The log of a mount started in the background (``kg-fuse mount`` without -f)."""
    return mount_state_dir(mountpoint) / "kg-fuse.log"
