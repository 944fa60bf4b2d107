"""A server on a machine without WordNet says so, and keeps a default that noise does not
pass: a real server over a copy of the session's store, WordNet hidden by pointing
``KG_WORDNET_DIR`` at an empty folder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kg_fuse.server.threshold.calibrate import NO_WORDNET_FLOOR
from tests.helpers.server import KGServer

THRESHOLD = "/admin/config/search-threshold"
MISSING = "no WordNet database found"


@pytest.fixture(scope="module")
def no_wordnet(kg_server_clone: Callable[..., KGServer],
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[KGServer]:
    server = kg_server_clone(env={"KG_WORDNET_DIR": str(tmp_path_factory.mktemp("empty"))})
    yield server
    server.stop()


def kg_fuse(server: KGServer, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``kg-fuse`` command in the server's environment (its store, its WordNet)."""
    env = {**os.environ, **server.env, **server.extra_env}
    return subprocess.run([sys.executable, "-m", "kg_fuse.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300, cwd=Path.cwd())


def test_server_status_and_log_say_that_wordnet_is_missing(no_wordnet: KGServer) -> None:
    status = kg_fuse(no_wordnet, "server", "status")
    assert status.returncode == 0, status.stderr
    assert "answering" in status.stdout
    warning = next(line for line in status.stdout.splitlines() if MISSING in line)
    assert "wordnet-base" in warning and f"{NO_WORDNET_FLOOR:.2f}" in warning
    assert MISSING in no_wordnet.log_text()  # said at start, before any search


def test_server_status_with_wordnet_warns_of_nothing(kg_server: KGServer) -> None:
    status = kg_fuse(kg_server, "server", "status")
    assert status.returncode == 0 and "running" in status.stdout
    assert "warning" not in status.stdout


def default_threshold(server: KGServer) -> dict:
    with server.client("admin") as admin:
        return admin.get(THRESHOLD).json()


def test_calibration_without_wordnet_never_goes_below_the_safe_floor(
        no_wordnet: KGServer) -> None:
    """The rule alone follows the noise the reading keeps at 0 without WordNet (0.03
    over the manual pages, where the evaluation's `--foo` scores 0.41). A store
    calibrated with WordNet is calibrated again when a server starts without it."""
    config = default_threshold(no_wordnet)
    assert config["source"] == "calibrated" and config["threshold"] >= NO_WORDNET_FLOOR
    assert "WordNet found or lost since the calibration" in no_wordnet.log_text()
    with no_wordnet.client("user") as user:
        body = user.post("/query/search", json={"query": "foo bar baz"}).json()
    assert body["threshold_used"] >= NO_WORDNET_FLOOR
    calibrated = kg_fuse(no_wordnet, "calibrate", "--write")  # by hand: the same
    assert calibrated.returncode == 0, calibrated.stderr
    assert "calibrated without WordNet" in calibrated.stdout
    assert default_threshold(no_wordnet)["threshold"] >= NO_WORDNET_FLOOR
    shown = kg_fuse(no_wordnet, "calibrate", "--show")  # what the store keeps says so too
    assert "calibrated without WordNet" in shown.stdout


def test_default_comes_back_down_when_wordnet_is_installed(no_wordnet: KGServer,
                                                          kg_server: KGServer) -> None:
    """Installing WordNet after a start without it must not leave the default held."""
    with kg_server.client("admin") as admin:
        with_wordnet = admin.get(THRESHOLD).json()["threshold"]
    assert kg_fuse(no_wordnet, "calibrate", "--write").returncode == 0  # without it
    assert default_threshold(no_wordnet)["threshold"] >= NO_WORDNET_FLOOR
    no_wordnet.restart(env={})  # WordNet found again
    try:
        assert default_threshold(no_wordnet)["threshold"] == with_wordnet < NO_WORDNET_FLOOR
        status = kg_fuse(no_wordnet, "server", "status")
        assert "running" in status.stdout and "warning" not in status.stdout
        shown = kg_fuse(no_wordnet, "calibrate", "--show")
        assert "calibrated without WordNet" not in shown.stdout
    finally:
        no_wordnet.stop()
