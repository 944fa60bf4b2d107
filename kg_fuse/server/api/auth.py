"""OAuth client-credentials auth: clients, bearer tokens and the credentials file.

Only hashes are stored: client secrets as salted PBKDF2, tokens as SHA-256 (they are
random 256-bit values, so a plain hash suffices). The plain secrets exist only in the
0600 credentials file, which is how the FUSE client and the tests find them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kg_fuse import owner_only
from kg_fuse.server.storage import clients
from kg_fuse.server.storage.clients import ClientRow
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)

DEFAULT_TOKEN_TTL = 3600
TOKEN_TTL_ENV = "KG_FUSE_SERVER_TOKEN_TTL"
PBKDF2_ROUNDS = 60_000
ADMIN_SCOPE = "read write admin"
USER_SCOPE = "read write"


@dataclass(frozen=True)
class Principal:
    """Who a request acts as."""

    client_id: str
    is_admin: bool


@dataclass(frozen=True)
class IssuedToken:
    access_token: str
    expires_in: int
    scope: str


def token_ttl(explicit: int | None = None) -> int:
    """Token lifetime: the option, else the environment, else one hour."""
    if explicit is not None:
        return explicit
    raw = os.environ.get(TOKEN_TTL_ENV)
    try:
        return int(raw) if raw else DEFAULT_TOKEN_TTL
    except ValueError:
        log.warning("ignoring non-integer %s=%r", TOKEN_TTL_ENV, raw)
        return DEFAULT_TOKEN_TTL


def _hash_secret(secret: str, salt: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), bytes.fromhex(salt),
                               PBKDF2_ROUNDS).hex()


def _hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_client(role: str, is_admin: bool) -> tuple[ClientRow, str]:
    """A client with a random id and secret: its row, and the secret in plain text."""
    client_id = f"kgfuse-{role}-{secrets.token_hex(6)}"
    secret = secrets.token_hex(32)  # no "-" to read as an option on a command line
    salt = secrets.token_hex(16)
    return ClientRow(client_id, _hash_secret(secret, salt), salt, role, is_admin), secret


def replace_clients(store: Store) -> dict[str, dict[str, str]]:
    """New admin and user clients in place of every client there was, whose tokens are
    revoked with them, in one transaction; returns the new ones' ids and secrets."""
    new = {role: _new_client(role, is_admin=role == "admin") for role in ("admin", "user")}
    removed, revoked = clients.replace_clients(store, [row for row, _ in new.values()])
    made = {role: (row.client_id, secret) for role, (row, secret) in new.items()}
    log.info("replaced %d clients by admin client %s and user client %s; %d tokens "
             "revoked", removed, made["admin"][0], made["user"][0], revoked)
    return {role: {"client_id": cid, "client_secret": secret}
            for role, (cid, secret) in made.items()}


#: Hashed for a client id that does not exist, so that answers as slowly as a wrong
#: secret does: the time taken never tells which client ids exist.
_NO_CLIENT_SALT = secrets.token_hex(16)
_NO_CLIENT_HASH = "0" * 64


def verify_client(store: Store, client_id: str, secret: str) -> Principal | None:
    row = clients.client_secret(store, client_id)
    salt, expected = (_NO_CLIENT_SALT, _NO_CLIENT_HASH) if row is None else (
        row["salt"], row["secret_hash"])
    if not hmac.compare_digest(_hash_secret(secret, salt), expected) or row is None:
        return None
    return Principal(client_id=client_id, is_admin=bool(row["is_admin"]))


def issue_token(store: Store, principal: Principal, ttl: int) -> IssuedToken:
    token = secrets.token_urlsafe(32)
    now = time.time()
    clients.add_token(store, _hash_token(token), principal.client_id, now + ttl)
    return IssuedToken(access_token=token, expires_in=ttl,
                       scope=ADMIN_SCOPE if principal.is_admin else USER_SCOPE)


def principal_for_token(store: Store, token: str) -> Principal | None:
    """The token's client, or None when unknown or expired."""
    row = clients.token_client(store, _hash_token(token))
    if row is None or row["expires_at"] <= time.time():
        return None
    return Principal(client_id=row["client_id"], is_admin=bool(row["is_admin"]))


# -- the credentials file ------------------------------------------------------------------


def write_private_json(path: Path, data: dict) -> None:
    """Write JSON atomically, readable by the owner only from the first byte on."""
    owner_only.create_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_credentials(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _valid_entry(store: Store, entry: object, admin: bool) -> bool:
    if not isinstance(entry, dict):
        return False
    principal = verify_client(store, str(entry.get("client_id", "")),
                              str(entry.get("client_secret", "")))
    return principal is not None and principal.is_admin == admin


def ensure_credentials(store: Store, path: Path, api_url: str) -> dict:
    """Reuse the clients of an existing credentials file, else replace them all.

    A file that is missing or does not match the store means the old secrets are out of
    the owner's hands (moved away, replaced): every client and token there was is revoked,
    not only superseded. The file is rewritten on every start so ``api_url`` names the
    port actually served.
    """
    data = _read_credentials(path)
    if (data is not None and _valid_entry(store, data.get("admin"), True)
            and _valid_entry(store, data.get("user"), False)):
        log.info("reusing the clients in %s", path)
    else:
        if data is not None:
            log.warning("credentials in %s do not match this store; replacing every client",
                        path)
        data = replace_clients(store)
    return write_credentials(path, api_url, data)


def write_credentials(path: Path, api_url: str, made: dict) -> dict:
    """The credentials file: where the server is, its admin and user clients (0600)."""
    result = {"api_url": api_url, "admin": made["admin"], "user": made["user"]}
    write_private_json(path, result)
    log.info("credentials written to %s (mode 0600)", path)
    return result


def rotate_credentials(store: Store, path: Path, api_url: str) -> dict:
    """Replace both clients and revoke every token, then write the new credentials file.

    Works beside a running server: it reads clients and tokens from the store on every
    request, so the old secrets and tokens are refused from the commit on.
    """
    return write_credentials(path, api_url, replace_clients(store))
