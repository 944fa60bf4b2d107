"""Saved queries belong to their server (issue 40), mounted for real: two embedded
servers on two data directories, started in turn on one port, mounted in turn at one
mountpoint, each shows its own saved queries and overrides; a query made before any
server answered goes to the first that does; the single store an earlier kg-fuse kept
per mountpoint is given, once, to the first server the mount reaches."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kg_fuse import paths
from kg_fuse.fs.queries.saved import QueryStore, SavedQuery, StoreState
from kg_fuse.server.storage.store import read_setting_at
from tests.helpers.mount import Mount, wait_for
from tests.helpers.server import KGServer

pytestmark = [pytest.mark.mount, pytest.mark.timeout(240)]

DOWN = [r"server unavailable"]  # the log of a mount started before its server


@pytest.fixture
def servers(kg_server: KGServer, tmp_path: Path) -> Iterator[tuple[KGServer, KGServer]]:
    """A and B: two servers on data directories of their own (copies of the session's
    store, with its clients), B on A's port: one runs at a time."""
    a = kg_server.clone(tmp_path / "server-a")
    b = kg_server.clone(tmp_path / "server-b")
    b.port = a.port
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def status(mount: Mount) -> str:
    result = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "status",
                             str(mount.mountpoint)], env=mount.env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result
    return result.stdout


def server_id(server: KGServer) -> str | None:
    """The identity the server reports (kept in its store)."""
    return read_setting_at(server.db_path, "server_id")


def threshold(mount: Mount, query: str) -> str:
    return mount.path(query, ".meta", "threshold").read_text().splitlines()[-1]


def test_another_server_on_the_same_port_shows_its_own_queries(
        servers: tuple[KGServer, KGServer], mount_factory, tmp_path: Path) -> None:
    a, b = servers
    where = tmp_path / "kg"
    a.start()
    first = mount_factory(mountpoint=where, server=a)
    first.path("json parsing").mkdir()
    first.path("json parsing", ".meta", "threshold").write_text("0.55\n")
    assert first.unmount() == 0

    a.stop()
    b.start()
    second = mount_factory(mountpoint=where, state_of=first, server=b)
    assert os.listdir(where) == ["ontology"]  # none of A's
    second.path("json parsing").mkdir()  # not "File exists"
    assert threshold(second, "json parsing") == "inherit"
    assert f"saved queries: those of server {server_id(b)} (at {b.api_url})" in status(second)
    assert second.unmount() == 0

    b.stop()
    a.start()
    third = mount_factory(mountpoint=where, state_of=first, server=a)
    assert sorted(os.listdir(where)) == ["json parsing", "ontology"]
    assert threshold(third, "json parsing") == "0.55"
    assert f"saved queries: those of server {server_id(a)} (at {a.api_url})" in status(third)


def test_a_query_made_before_the_server_first_answers_is_that_server_s(
        servers: tuple[KGServer, KGServer], mount_factory, tmp_path: Path) -> None:
    a, b = servers
    where = tmp_path / "kg"
    a.start()  # once: its credentials name its port
    a.stop()
    first = mount_factory(mountpoint=where, server=a, allowed_log=DOWN,
                          extra_args=["--poll-interval", "0.5"])
    first.path("json parsing").mkdir()  # at once, though no server ever answered
    a.start()
    wait_for(lambda: f"saved queries: those of server {server_id(a)} (at {a.api_url})"
             in status(first), timeout=30, what="the mount to hear A")  # A's id: once asked
    assert sorted(os.listdir(where)) == ["json parsing", "ontology"]
    assert first.unmount() == 0

    a.stop()
    b.start()
    mount_factory(mountpoint=where, state_of=first, server=b)
    assert os.listdir(where) == ["ontology"]  # it was A's


def test_an_earlier_kg_fuse_s_queries_go_to_the_first_server_reached(
        servers: tuple[KGServer, KGServer], mount_factory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = servers
    where = tmp_path / "kg"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "mount-data-0"))  # the first mount's
    state_dir = paths.mount_state_dir(where)
    # the store as the earlier kg-fuse wrote it: one QueryStore in the mountpoint's folder
    QueryStore(state_dir).save(StoreState({
        "gzip": SavedQuery(("gzip",), "gzip", threshold=0.42)}))
    a.start()
    first = mount_factory(mountpoint=where, server=a, allowed_log=[r"now belong to server"])
    assert sorted(os.listdir(where)) == ["gzip", "ontology"]
    assert threshold(first, "gzip") == "0.42"
    assert first.unmount() == 0

    a.stop()
    b.start()
    second = mount_factory(mountpoint=where, state_of=first, server=b)
    assert os.listdir(where) == ["ontology"]  # A's, not B's
    assert second.unmount() == 0
    said = "the 1 saved queries of this mountpoint, from before each server's were kept "
    assert said in first.log_text() and f"now belong to server {server_id(a)}" in (
        first.log_text())
    assert (state_dir / "queries.toml.before-servers").exists()  # the backup
    assert not (state_dir / "queries.toml").exists()  # migrated once
