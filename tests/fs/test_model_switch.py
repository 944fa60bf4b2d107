"""One model per store, and a default that follows the model (ADR-508), end to end: a
server refuses a store another model embedded and names the command that re-embeds it;
re-embedding is all or nothing (a ``kill -9`` midway leaves the old store serving); and
after a switch the server calibrates the new model's own default, which a mount that
inherits it lists at within one poll, without a remount."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from kg_fuse.server.store_model import record
from tests.helpers.mount import wait_for
from tests.helpers.server import KGServer

pytestmark = pytest.mark.mount

OTHER = "all-MiniLM-L6-v2-int8"
TEXT = "compress data with gzip"
MODULES = ["--corpus", "stdlib", "--modules", ",".join(SMALL_TEST_MODULES)]


def kg(server: KGServer, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kg_fuse.cli", *args],
                          env={**os.environ, **server.env}, capture_output=True, text=True,
                          timeout=timeout, check=False)


def model_of(db: Path) -> str:
    held = record.read_at(db)
    return "" if held is None else held.name


def vector_rows(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM concept_views").fetchone()[0]


@pytest.fixture
def server(tmp_path: Path, small_store: Path) -> KGServer:
    made = KGServer(tmp_path / "srv", modules=SMALL_TEST_MODULES, seed=small_store)
    yield made
    made.stop()


def test_a_server_given_another_model_refuses_the_store_and_says_how_to_re_embed(
        server: KGServer) -> None:
    rows = vector_rows(server.db_path)
    result = kg(server, "serve", "--port", str(server.port), "--model", OTHER, *MODULES)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("kg-fuse: ") and "all-MiniLM-L6-v2" in last
    assert f"kg-fuse index --model {OTHER}" in last
    assert model_of(server.db_path) in ("", "all-MiniLM-L6-v2")  # refused: nothing written
    assert vector_rows(server.db_path) == rows


def test_a_re_embedding_killed_midway_leaves_the_old_store_intact(server: KGServer) -> None:
    rows = vector_rows(server.db_path)
    process = subprocess.Popen([sys.executable, "-m", "kg_fuse.cli", "index", "--model",
                                OTHER, *MODULES], env={**os.environ, **server.env},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen = ""
    while "embedding concepts" not in seen:  # the progress bar: it is embedding
        line = process.stderr.readline()
        assert line or process.poll() is None, seen
        seen += line
    time.sleep(0.5)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert model_of(server.db_path) == "all-MiniLM-L6-v2"
    assert vector_rows(server.db_path) == rows
    server.start()  # the old store serves as before
    found = server.client("user").post("/query/search", json={"query": TEXT}).json()
    assert found["results"]
    assert server.client("user").get("/health").json()["embedding_model"] == \
        "all-MiniLM-L6-v2"


def test_after_a_switch_a_mount_lists_at_the_new_models_default_within_a_poll(
        server: KGServer, mount_factory) -> None:
    server.start()
    admin = server.client("admin")
    # the administrator's value is in the old model's scores: the switch leaves it behind
    assert admin.put("/admin/config/search-threshold", json={"threshold": 0.55}
                     ).status_code == 200
    mount = mount_factory(server=server, extra_args=["--poll-interval", "0.5"],
                          allowed_log=["server unavailable"])  # the restart
    mount.path(TEXT).mkdir()
    threshold = mount.path(TEXT, ".meta", "threshold")
    assert "Server default: 0.55" in threshold.read_text()
    before = sorted(os.listdir(mount.path(TEXT)))

    result = kg(server, "index", "--model", OTHER, *MODULES)
    assert result.returncode == 0, result.stderr
    assert "kg-fuse server" in result.stdout  # the running server must be restarted
    # the old store serves until the server restarts
    assert server.client("user").get("/health").json()["embedding_model"] == \
        "all-MiniLM-L6-v2"
    assert sorted(os.listdir(mount.path(TEXT))) == before

    server.restart()
    health = httpx.get(f"{server.api_url}/health", timeout=10).json()
    assert health["embedding_model"] == OTHER
    assert model_of(server.db_path) == OTHER
    new_default = server.client("admin").get("/admin/config/search-threshold"
                                             ).json()["threshold"]
    assert new_default != 0.55
    wait_for(lambda: f"Server default: {new_default:g}" in threshold.read_text(),
             timeout=10, what="the mount to show the new model's default")
    expected = server.client("user").post("/query/search", json={
        "query": TEXT, "limit": 50}).json()
    assert expected["threshold_used"] == new_default
    listed = [name for name in os.listdir(mount.path(TEXT)) if name.endswith(".md")]
    assert listed and len(listed) <= len(expected["results"])
