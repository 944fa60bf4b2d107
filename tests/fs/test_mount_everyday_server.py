"""Mounted: everyday tools on what the mount keeps for the server. ``df`` and ``df -i``
show figures a monitor accepts, an empty file copied into ``ingest/`` is refused at
close and leaves nothing behind, and deleting an ontology the server takes long over
returns when it is done instead of reporting a timeout."""

from __future__ import annotations

import errno
import os
import subprocess
import time

import pytest

from tests.fs.conftest import ServerAdmin
from tests.helpers.faults import FaultProxy, proxy_env

pytestmark = pytest.mark.mount

FAST = ["--ingest-delay", "0.5", "--poll-interval", "1"]
INGEST_LOG = [r"WARNING kg_fuse.fs.queries.ingest", r"WARNING kg_fuse.fs.kernel.errnos"]


def sh(command: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


# -- df --------------------------------------------------------------------------------------

def test_df_shows_a_size_with_free_space_and_free_inodes(mounted) -> None:
    mounted.path("compress data with gzip").mkdir()
    os.listdir(mounted.path("compress data with gzip"))  # some inodes in use
    fs = os.statvfs(mounted.mountpoint)
    assert fs.f_blocks > 0 and 0 < fs.f_bavail <= fs.f_bfree <= fs.f_blocks, fs
    assert fs.f_files > 0 and 0 < fs.f_favail <= fs.f_ffree < fs.f_files, fs
    df = sh(f"df -P {str(mounted.mountpoint)!r}", "/").stdout.splitlines()[-1].split()
    assert int(df[1]) > 0 and int(df[3]) > 0 and df[4] != "100%", df
    inodes = sh(f"df -iP {str(mounted.mountpoint)!r}", "/").stdout.splitlines()[-1].split()
    assert int(inodes[3]) > 0 and inodes[4] != "100%", inodes


# -- an empty file in ingest/ ------------------------------------------------------------------

@pytest.fixture
def farm(kg_scratch_server, mount_factory):
    admin = ServerAdmin(kg_scratch_server)
    mount = mount_factory(server=kg_scratch_server, extra_args=FAST, allowed_log=INGEST_LOG)
    mount.path("ontology", "Empty farm").mkdir()
    yield mount, admin
    assert admin.http.delete("/ontology/Empty farm").status_code == 200


def uploads(admin: ServerAdmin) -> int:
    return admin.requests("POST /ingest")


def test_touch_of_an_empty_file_in_ingest_is_refused_and_leaves_nothing(farm) -> None:
    mount, admin = farm
    ingest = mount.path("ontology", "Empty farm", "ingest")
    before = uploads(admin)
    done = sh("touch empty.md", ingest)
    assert done.returncode != 0 and "No data available" in done.stderr, done
    with pytest.raises(OSError) as refused, open(ingest / "nothing.md", "wb"):
        pass
    assert refused.value.errno == errno.ENODATA
    time.sleep(2)  # four times the ingest delay
    assert os.listdir(ingest) == []
    assert uploads(admin) == before
    with open(ingest / ".partial.md", "wb"):
        pass  # an editor's temporary name: never uploaded, so never refused
    assert os.listdir(ingest) == [".partial.md"]
    os.utime(ingest / ".partial.md", (1_000_000_000, 1_000_000_000))  # cp -p, touch -d
    assert (ingest / ".partial.md").stat().st_mtime == 1_000_000_000


# -- deleting an ontology the server takes long over -----------------------------------------

@pytest.fixture
def slow_proxy(kg_scratch_server):
    with FaultProxy(kg_scratch_server.api_url) as proxy:
        yield proxy


def test_rmdir_of_an_ontology_the_server_takes_long_over_returns_when_done(
        kg_scratch_server, slow_proxy, mount_factory) -> None:
    mount = mount_factory(server=kg_scratch_server, env=proxy_env(kg_scratch_server),
                          extra_args=["--api-url", slow_proxy.url, "--timeout", "1",
                                      "--allow-ontology-delete", "--poll-interval", "3600"])
    ontology = mount.path("ontology", "Slow to delete")
    ontology.mkdir()
    slow_proxy.set_mode("slow", paths=["/ontology/"], delay=3.5)  # 3.5 deadlines
    started = time.monotonic()
    os.rmdir(ontology)  # not ETIMEDOUT: the server answers while it works
    assert time.monotonic() - started >= 3.5
    slow_proxy.set_mode("pass")
    admin = ServerAdmin(kg_scratch_server)
    assert admin.http.get("/ontology/Slow to delete").status_code == 404
    assert "Slow to delete" not in os.listdir(mount.path("ontology"))


def test_rmdir_of_an_ontology_on_a_stalled_server_times_out_in_bounded_time(
        kg_scratch_server, slow_proxy, mount_factory) -> None:
    mount = mount_factory(server=kg_scratch_server, env=proxy_env(kg_scratch_server),
                          extra_args=["--api-url", slow_proxy.url, "--timeout", "1",
                                      "--allow-ontology-delete", "--poll-interval", "3600"],
                          allowed_log=[r"WARNING kg_fuse\.fs\.kernel\.errnos"])
    ontology = mount.path("ontology", "Stalled delete")
    ontology.mkdir()
    slow_proxy.set_mode("stall")
    started = time.monotonic()
    with pytest.raises(OSError) as refused:
        os.rmdir(ontology)
    assert refused.value.errno == errno.ETIMEDOUT
    assert time.monotonic() - started < 10
    slow_proxy.set_mode("pass")
    ServerAdmin(kg_scratch_server).http.delete("/ontology/Stalled delete")
    assert "ontology" in os.listdir(mount.mountpoint)
