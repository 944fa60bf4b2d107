"""Where the filesystem gets its API address and OAuth client credentials.

Order of precedence, first match wins for each of address and credentials:
explicit values (flags / a secret file), the environment (``KG_API_URL``,
``KG_CLIENT_ID``, ``KG_CLIENT_SECRET``), the embedded server's credentials file, then
the platform CLI's ``~/.config/kg/config.json``. The embedded server's file is the
default data directory's, or the one of the data directory named (``--data-dir``), which
is then as explicit as a flag and comes before the environment. Secrets never come from
the command line itself, so they never show in ``ps``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kg_fuse import paths
from kg_fuse.client.errors import MissingCredentials

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Credentials:
    client_id: str
    client_secret: str
    source: str

    def __repr__(self) -> str:  # never print a secret, even in a traceback
        return f"Credentials(client_id={self.client_id!r}, source={self.source!r})"


@dataclass(frozen=True)
class Connection:
    api_url: str
    credentials: Credentials
    # looks again where the credentials came from: what is there now for this server
    reread: Callable[[], Credentials | None] | None = field(default=None, compare=False,
                                                             repr=False)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable credentials file %s: %s", path, exc)
        return None
    return data if isinstance(data, dict) else None


def _pair(section: Any, source: str, prefix: str = "") -> Credentials | None:
    if not isinstance(section, dict):
        return None
    cid, secret = section.get(f"{prefix}client_id"), section.get(f"{prefix}client_secret")
    if isinstance(cid, str) and isinstance(secret, str) and cid and secret:
        return Credentials(cid, secret, source)
    return None


def _same_server(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


@dataclass(frozen=True)
class _Files:
    """The credentials files a lookup reads: the embedded server's (``named``: of a
    ``--data-dir`` other than the default) and the platform CLI's."""

    server: dict[str, Any]
    server_path: Path
    named: bool
    cli: dict[str, Any]


def _read_files(data_dir: str | None) -> _Files:
    base = Path(data_dir) if data_dir else None
    named = not paths.is_default_data_dir(base)  # a --data-dir other than the default
    server_path = paths.server_credentials_path(base)
    server_file = _read_json(server_path) or {}
    if named and not server_file:
        raise MissingCredentials(f"no credentials in {server_path}: no server has run on "
                                 f"{data_dir}")
    return _Files(server_file, server_path, named,
                  _read_json(paths.platform_cli_config_path()) or {})


def _address(api_url: str | None, files: _Files) -> str:
    """The API address, first match wins: explicit, a named data directory's server,
    the environment, the default data directory's server, the platform CLI's."""
    return (
        api_url
        or (files.server.get("api_url") if files.named else None)
        or os.environ.get("KG_API_URL")
        or files.server.get("api_url")
        or files.cli.get("api_url")
        or paths.DEFAULT_API_URL
    ).rstrip("/")


def _from_platform_cli(url: str, files: _Files) -> Credentials | None:
    """The platform CLI's client, if its file is for the same server (or names none)."""
    if not files.cli:
        return None
    cli_url = files.cli.get("api_url")
    if isinstance(cli_url, str) and not _same_server(cli_url, url):
        return None
    return _pair(files.cli.get("auth"), str(paths.platform_cli_config_path()), "oauth_")


def _candidates(url: str, client_id: str | None, client_secret_file: str | None,
                role: str, files: _Files) -> list[Credentials | None]:
    """Every place credentials may come from, first match wins (None: nothing there)."""
    env = os.environ
    candidates: list[Credentials | None] = []
    if client_id and client_secret_file:
        secret = Path(client_secret_file).read_text(encoding="utf-8").strip()
        source = f"--client-secret-file {client_secret_file}"
        candidates.append(Credentials(client_id, secret, source))
    from_server = None
    if files.server and _same_server(str(files.server.get("api_url", url)), url):
        from_server = _pair(files.server.get(role), f"{files.server_path} ({role})")
    if files.named:
        candidates.append(from_server)
    if env.get("KG_CLIENT_ID") and env.get("KG_CLIENT_SECRET"):
        candidates.append(Credentials(env["KG_CLIENT_ID"], env["KG_CLIENT_SECRET"], "environment"))
    if not files.named:
        candidates.append(from_server)
    candidates.append(_from_platform_cli(url, files))
    return candidates


def resolve_connection(
    api_url: str | None = None,
    client_id: str | None = None,
    client_secret_file: str | None = None,
    role: str = "user",
    data_dir: str | None = None,
) -> Connection:
    """Work out which server to talk to and as whom.

    ``role`` picks the embedded server's ``user`` (default) or ``admin`` client;
    ``data_dir`` the embedded server running on that data directory.
    """
    files = _read_files(data_dir)
    url = _address(api_url, files)
    for found in _candidates(url, client_id, client_secret_file, role, files):
        if found is not None:
            log.info("using client %s from %s for %s", found.client_id, found.source, url)
            reread = functools.partial(_reread, url, api_url, client_id, client_secret_file,
                                       role, data_dir)
            return Connection(url, found, reread)
    raise MissingCredentials(
        f"no client credentials for {url}: set KG_CLIENT_ID and KG_CLIENT_SECRET, "
        f"pass --client-id with --client-secret-file, start the embedded server "
        f"(it writes {files.server_path}), or log in with the platform CLI"
    )


def _reread(url: str, *how: str | None) -> Credentials | None:
    """The credentials the same lookup finds now, for the same server (None if none):
    the server's credentials file is rewritten when they are rotated."""
    try:
        again = resolve_connection(*how)
    except (MissingCredentials, OSError):
        return None
    return again.credentials if _same_server(again.api_url, url) else None
