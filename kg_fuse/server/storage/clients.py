"""The rows of sign-in: OAuth clients (their secrets' salted hashes) and bearer tokens
(their hashes). What is hashed, and how, is :mod:`kg_fuse.server.api.auth`'s."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from kg_fuse.server.storage.store import Store


@dataclass(frozen=True)
class ClientRow:
    client_id: str
    secret_hash: str
    salt: str
    role: str
    is_admin: bool


def _insert(conn: sqlite3.Connection, client: ClientRow) -> None:
    conn.execute(
        "INSERT INTO clients(client_id, secret_hash, salt, role, is_admin, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (client.client_id, client.secret_hash, client.salt, client.role,
         int(client.is_admin), time.time()))


def replace_clients(store: Store, clients: list[ClientRow]) -> tuple[int, int]:
    """These clients in place of every client there was, whose tokens go with them, in
    one transaction; returns (clients removed, tokens revoked)."""
    with store.transaction() as conn:
        revoked = conn.execute("DELETE FROM tokens").rowcount
        removed = conn.execute("DELETE FROM clients").rowcount
        for client in clients:
            _insert(conn, client)
    return removed, revoked


def client_secret(store: Store, client_id: str) -> sqlite3.Row | None:
    """The client's ``secret_hash``, ``salt`` and ``is_admin``, or None."""
    return store.query_one(
        "SELECT secret_hash, salt, is_admin FROM clients WHERE client_id = ?", (client_id,))


def add_token(store: Store, token_hash: str, client_id: str, expires_at: float) -> None:
    """Record a token, dropping the expired ones in the same transaction."""
    with store.transaction() as conn:
        conn.execute("DELETE FROM tokens WHERE expires_at < ?", (time.time(),))
        conn.execute("INSERT INTO tokens(token_hash, client_id, expires_at) VALUES (?, ?, ?)",
                     (token_hash, client_id, expires_at))


def token_client(store: Store, token_hash: str) -> sqlite3.Row | None:
    """The token's ``client_id``, ``expires_at`` and the client's ``is_admin``, or None."""
    return store.query_one(
        "SELECT t.client_id, t.expires_at, c.is_admin FROM tokens t "
        "JOIN clients c ON c.client_id = t.client_id WHERE t.token_hash = ?", (token_hash,))
