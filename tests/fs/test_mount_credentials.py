"""Mounted: when the server's credentials are rotated, a running mount carries on with
the new ones from the credentials file; a mount whose client is revoked for good says so."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import httpx
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


def test_failed_sign_ins_by_someone_else_never_lock_the_mount_out(server: KGServer,
                                                                  mount_factory) -> None:
    """Anyone on the machine who knows the user client's id (it is no secret) failed 11
    sign-ins for it: the right secret was refused from then on, and a mount started
    then failed ``ls`` with EAGAIN. Here someone keeps failing while a mount starts."""
    token = f"{server.api_url}/auth/oauth/token"
    guess = {"grant_type": "client_credentials", "client_id": server.user["client_id"],
             "client_secret": "a guess"}
    answers: set[int] = set()
    stop = threading.Event()

    def guess_on() -> None:
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                answers.add(http.post(token, data=guess).status_code)
                time.sleep(0.02)

    guesser = threading.Thread(target=guess_on)
    guesser.start()
    try:
        while 429 not in answers:
            time.sleep(0.05)
        mount = mount_factory(server=server)
        for query in ("gzip", "compress data"):
            mount.path(query).mkdir()
            assert results(mount.path(query))
    finally:
        stop.set()
        guesser.join()
    assert answers == {401, 429}  # the guessing itself is throttled
