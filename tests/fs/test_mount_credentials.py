"""Mounted: when the server's credentials are rotated, a running mount carries on with
the new ones from the credentials file; a mount whose client is revoked for good says so."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from tests.helpers.server import KGServer

pytestmark = pytest.mark.mount


@pytest.fixture
def server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    clone = kg_server_clone()  # its own store: its clients are replaced here
    yield clone
    clone.stop()


def rotate(server: KGServer) -> None:
    rotated = subprocess.run(
        [sys.executable, "-m", "kg_fuse.cli", "server", "credentials", "--rotate"],
        env={**os.environ, **server.env}, capture_output=True, text=True, timeout=120)
    assert rotated.returncode == 0, rotated.stderr


def results(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(".concept.md")]


def test_a_mount_carries_on_with_rotated_credentials(server: KGServer,
                                                     mount_factory) -> None:
    mount = mount_factory(server=server)
    mount.path("gzip").mkdir()
    assert results(mount.path("gzip"))
    old = server.user["client_id"]
    rotate(server)
    new = server.user["client_id"]
    assert new != old
    mount.path("compress data").mkdir()  # the mount's token was revoked with its client
    assert results(mount.path("compress data"))
    assert f"client {old} was refused; using client {new}" in mount.log_text()


def test_a_mount_whose_client_was_revoked_says_why(server: KGServer,
                                                   mount_factory) -> None:
    given = {"KG_CLIENT_ID": server.user["client_id"],
             "KG_CLIENT_SECRET": server.user["client_secret"]}
    mount = mount_factory(server=server, env=given, allowed_log=[r"rejected"])
    mount.path("gzip").mkdir()
    assert results(mount.path("gzip"))
    rotate(server)
    with pytest.raises(OSError) as refused:
        mount.path("compress data").mkdir()
        os.listdir(mount.path("compress data"))
    assert refused.value.errno == errno.EACCES
    reason = (f"client '{given['KG_CLIENT_ID']}' rejected: Invalid client credentials "
              "(revoked or replaced, and environment holds no newer credentials)")
    assert reason in mount.log_text()
