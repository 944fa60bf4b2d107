"""Credentials you can rotate: ``kg-fuse server credentials --rotate`` replaces both
clients and revokes every token, and a server whose credentials file was replaced stops
honouring the old secrets and tokens."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.helpers.server import KGServer

THRESHOLD = "/admin/config/search-threshold"


@pytest.fixture
def server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    clone = kg_server_clone()  # its own store: its clients are replaced here
    yield clone
    clone.stop()


def token_status(server: KGServer, creds: dict[str, str]) -> int:
    return httpx.post(f"{server.api_url}/auth/oauth/token", timeout=30,
                      data={"grant_type": "client_credentials", **creds}).status_code


def epoch_status(server: KGServer, token: str) -> int:
    return httpx.get(f"{server.api_url}/database/epoch", timeout=30,
                     headers={"Authorization": f"Bearer {token}"}).status_code


def threshold_status(server: KGServer, token: str) -> int:
    return httpx.get(f"{server.api_url}{THRESHOLD}", timeout=30,
                     headers={"Authorization": f"Bearer {token}"}).status_code


def assert_replaced(server: KGServer, old: dict, old_tokens: dict[str, str]) -> None:
    """The old clients and their tokens are refused; the file's new ones work."""
    new = server.credentials
    for who in ("admin", "user"):
        assert new[who]["client_id"] != old[who]["client_id"]
        assert new[who]["client_secret"] != old[who]["client_secret"]
        assert token_status(server, old[who]) == 401, who
        assert epoch_status(server, old_tokens[who]) == 401, who
    assert threshold_status(server, old_tokens["admin"]) == 401
    fresh = {who: server.fetch_token(who) for who in ("admin", "user")}
    assert epoch_status(server, fresh["user"]) == 200
    assert threshold_status(server, fresh["admin"]) == 200
    assert threshold_status(server, fresh["user"]) == 403  # still an ordinary user
    assert stat.S_IMODE(server.credentials_path.stat().st_mode) == 0o600


def test_rotate_replaces_both_clients_and_revokes_every_token(server: KGServer) -> None:
    old = server.credentials
    old_tokens = {who: server.fetch_token(who) for who in ("admin", "user")}
    rotated = subprocess.run(
        [sys.executable, "-m", "kg_fuse.cli", "server", "credentials", "--rotate"],
        env={**os.environ, **server.env}, capture_output=True, text=True, timeout=120)
    assert rotated.returncode == 0, rotated.stderr
    assert "revoked" in rotated.stdout and old["user"]["client_secret"] not in rotated.stdout
    new = server.credentials
    assert new["api_url"] == server.api_url  # the running server's address is kept
    assert new["user"]["client_secret"] not in rotated.stdout
    assert_replaced(server, old, old_tokens)  # by the running server, without a restart

    server.restart()  # the new clients are kept, not replaced again
    assert server.credentials == new
    assert token_status(server, old["admin"]) == 401
    assert token_status(server, new["admin"]) == 200


def test_a_replaced_credentials_file_revokes_the_old_clients(server: KGServer) -> None:
    old = server.credentials
    old_tokens = {who: server.fetch_token(who) for who in ("admin", "user")}
    server.stop()
    server.credentials_path.rename(server.credentials_path.with_name("moved-away.json"))
    server.start()
    assert_replaced(server, old, old_tokens)
