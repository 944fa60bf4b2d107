"""The knowledge-graph platform the live tier (``tests/platform``) runs against: where it
is, and talking to it as its users do.

Found, in order, from the environment variables ``KG_PLATFORM_URL``,
``KG_PLATFORM_ADMIN_USER``, ``KG_PLATFORM_ADMIN_PASSWORD``,
``KG_PLATFORM_CONTRIBUTOR_USER`` and ``KG_PLATFORM_CONTRIBUTOR_PASSWORD``; else from the
``KEY=value`` file named by ``KG_PLATFORM_ENV``; else from the file the project's harness
writes (``./scripts/platform.sh up``):
``${XDG_CACHE_HOME:-$HOME/.cache}/kg-fuse-platform/run/platform.env``. A variable set in
the environment wins over the file's. Without a URL, or when ``GET /health`` does not
answer, the tier is skipped with ``NO_PLATFORM`` and the reason.

Each signed-in user gets a personal OAuth client of its own
(``POST /auth/oauth/clients/personal``), deleted again by ``PersonalClient.delete``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

NO_PLATFORM = "no platform: start one with ./scripts/platform.sh up (docs/platform.md)"
KEYS = ("KG_PLATFORM_URL", "KG_PLATFORM_ADMIN_USER", "KG_PLATFORM_ADMIN_PASSWORD",
        "KG_PLATFORM_CONTRIBUTOR_USER", "KG_PLATFORM_CONTRIBUTOR_PASSWORD")
DEFAULTS = {"KG_PLATFORM_ADMIN_USER": "admin",
            "KG_PLATFORM_ADMIN_PASSWORD": "offline-admin-pw",
            "KG_PLATFORM_CONTRIBUTOR_USER": "contributor",
            "KG_PLATFORM_CONTRIBUTOR_PASSWORD": "offline-contributor-pw"}


@dataclass(frozen=True)
class PlatformConfig:
    url: str
    admin_user: str
    admin_password: str
    contributor_user: str
    contributor_password: str
    source: str  # where it was found, for messages

    def credentials(self, role: str) -> tuple[str, str]:
        """(username, password) of ``admin`` or ``contributor``."""
        if role == "admin":
            return self.admin_user, self.admin_password
        return self.contributor_user, self.contributor_password


def default_env_file(environ: Mapping[str, str] = os.environ) -> Path:
    cache = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")) / ".cache")
    return Path(cache).expanduser() / "kg-fuse-platform" / "run" / "platform.env"


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (``export``, quotes and comments allowed), as a shell reads them."""
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def find_platform(environ: Mapping[str, str] = os.environ) -> PlatformConfig | str:
    """The platform's configuration, or why there is none (a skip reason)."""
    values: dict[str, str] = dict(DEFAULTS)
    source = "the environment"
    if not environ.get("KG_PLATFORM_URL"):
        named = environ.get("KG_PLATFORM_ENV")
        path = Path(named) if named else default_env_file(environ)
        if not path.is_file():
            where = f"KG_PLATFORM_ENV={named} is not a file" if named else \
                f"KG_PLATFORM_URL is not set and {path} does not exist"
            return f"{NO_PLATFORM}; {where}"
        values.update({k: v for k, v in read_env_file(path).items() if k in KEYS and v})
        source = str(path)
    values.update({k: environ[k] for k in KEYS if environ.get(k)})
    if not values.get("KG_PLATFORM_URL"):
        return f"{NO_PLATFORM}; {source} has no KG_PLATFORM_URL"
    config = PlatformConfig(values["KG_PLATFORM_URL"].rstrip("/"),
                            values["KG_PLATFORM_ADMIN_USER"],
                            values["KG_PLATFORM_ADMIN_PASSWORD"],
                            values["KG_PLATFORM_CONTRIBUTOR_USER"],
                            values["KG_PLATFORM_CONTRIBUTOR_PASSWORD"], source)
    try:
        health = httpx.get(f"{config.url}/health", timeout=5)
    except httpx.HTTPError as exc:
        return f"{NO_PLATFORM}; {config.url} (from {source}) does not answer: {exc!r}"
    if health.status_code != 200:
        return f"{NO_PLATFORM}; {config.url}/health answered {health.status_code}"
    return config


@dataclass
class PersonalClient:
    """A personal OAuth client of one platform user, as ``kg login`` makes one."""

    url: str
    role: str  # admin, contributor
    client_id: str
    client_secret: str

    @classmethod
    def create(cls, config: PlatformConfig, role: str, purpose: str) -> PersonalClient:
        username, password = config.credentials(role)
        response = httpx.post(f"{config.url}/auth/oauth/clients/personal", timeout=30,
                              data={"username": username, "password": password,
                                    "client_name": f"kg-fuse tests: {purpose}"})
        if response.status_code != 201:
            raise RuntimeError(f"signing in as {username} ({config.source}): "
                               f"HTTP {response.status_code} {response.text[:200]}")
        body = response.json()
        return cls(config.url, role, body["client_id"], body["client_secret"])

    def token(self, url: str | None = None) -> str:
        response = httpx.post(f"{url or self.url}/auth/oauth/token", timeout=30,
                              data={"grant_type": "client_credentials",
                                    "client_id": self.client_id,
                                    "client_secret": self.client_secret})
        response.raise_for_status()
        return str(response.json()["access_token"])

    def http(self, url: str | None = None) -> httpx.Client:
        """A client of ``url`` (the platform, or a proxy in front of it) with a token."""
        return httpx.Client(base_url=url or self.url, timeout=60,
                            headers={"Authorization": f"Bearer {self.token(url)}"})

    def write_secret(self, path: Path) -> Path:
        """The secret in an owner-only file, for ``--client-secret-file``."""
        path.write_text(self.client_secret + "\n")
        path.chmod(0o600)
        return path

    def delete(self) -> None:
        """Revoke the client (its own token may delete it)."""
        with self.http() as http:
            http.delete(f"/auth/oauth/clients/personal/{self.client_id}")


def session_token() -> str:
    """A short random word that makes this session's ontology names its own."""
    return secrets.token_hex(3)


class PlatformAdmin:
    """The platform's administrator, straight to the platform (never recorded): making and
    removing the session's ontologies, and putting the default back."""

    def __init__(self, client: PersonalClient) -> None:
        self.client = client
        self.http = client.http()

    def close(self) -> None:
        self.http.close()

    def default_setting(self) -> float | None:
        """The configured default (None: never set, the fallback applies)."""
        response = self.http.get("/admin/config/search-threshold")
        response.raise_for_status()
        value = response.json()["threshold"]
        return None if value is None else float(value)

    def fallback(self) -> float:
        return float(self.http.get("/admin/config/search-threshold").json()["fallback"])

    def restore_default(self, setting: float | None) -> None:
        """Put back a setting read by ``default_setting``; an unset one cannot be unset
        through the API, so it gets the fallback's value, which searches treat alike."""
        value = setting if setting is not None else self.fallback()
        self.http.put("/admin/config/search-threshold",
                      json={"threshold": value}).raise_for_status()

    def delete_ontology(self, name: str) -> None:
        """Gone, with its documents (``force``: whether or not it exists)."""
        self.http.delete(f"/ontology/{quote(name, safe='')}", params={"force": "true"},
                         timeout=300).raise_for_status()
