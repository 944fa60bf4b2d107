"""Mounted: the generated files behave like files under everyday tools. ``status`` and
``query.toml`` change only when something they report changes, their mtime moves with
their bytes, an open handle follows them (``tail -f``), and ``touch`` on a result says
EPERM instead of exiting 0 and changing nothing."""

from __future__ import annotations

import errno
import os
import subprocess
import time

import pytest

pytestmark = pytest.mark.mount

QUERY = "compress data with gzip"
POLL = ["--poll-interval", "1"]  # the server's epoch and default, checked every second


def sh(command: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def meta(mount_factory):
    mount = mount_factory(extra_args=POLL)
    mount.path(QUERY).mkdir()
    os.listdir(mount.path(QUERY))  # the listing fetched: the default learned by a search
    return mount.path(QUERY, ".meta")


def test_status_and_query_toml_are_the_same_bytes_across_polls(meta):
    first = sh("md5sum status query.toml", meta)
    mtimes = [(meta / name).stat().st_mtime_ns for name in ("status", "query.toml")]
    time.sleep(3.5)  # three polls of the epoch and the default
    second = sh("md5sum status query.toml", meta)
    assert first.returncode == second.returncode == 0
    assert second.stdout == first.stdout
    assert [(meta / name).stat().st_mtime_ns for name in ("status", "query.toml")] == mtimes


def test_the_mtime_moves_when_the_bytes_do(meta, kg_admin):
    """A new server default changes what both files report, though no file of the query
    was written: an mtime-based copy must see it."""
    names = ("status", "query.toml")
    before = {name: ((meta / name).read_text(), (meta / name).stat().st_mtime_ns)
              for name in names}
    with kg_admin.default_set_to(0.61):
        time.sleep(2.5)  # the next poll learns it
        after = {name: ((meta / name).read_text(), (meta / name).stat().st_mtime_ns)
                 for name in names}
    for name in names:
        assert "0.61" in after[name][0] and after[name][0] != before[name][0], name
        assert after[name][1] > before[name][1], name


def test_tail_f_follows_the_status_across_a_threshold_change(meta):
    status = meta / "status"
    old = status.read_text()
    with subprocess.Popen(["tail", "-n", "+1", "-f", "status"], cwd=meta,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as tail:
        try:
            time.sleep(4)  # polls come and go: nothing to follow
            assert sh("echo 0.5 > threshold", meta).returncode == 0
            new = status.read_text()
            time.sleep(6)
        finally:
            tail.terminate()
        out, err = tail.communicate(timeout=10)
    assert "effective threshold: 0.5 (override)" in new and len(new) < len(old)
    # the old version whole, then the new one whole (GNU tail says a shorter file was
    # truncated, and prints it from the start): no stale or half lines
    assert out == old + new, (out, err)
    assert err.count("file truncated") == 1, err


def test_touch_on_a_result_says_it_is_not_permitted(meta):
    query = meta.parent
    result = next(n for n in os.listdir(query) if n.endswith(".concept.md"))
    before = (query / result).stat().st_mtime_ns
    done = sh(f"touch {result!r}", query)
    # touch reports its open's error (a result is read-only) once setting times failed
    assert done.returncode != 0 and "Permission denied" in done.stderr, done
    with pytest.raises(PermissionError) as refused:
        os.utime(query / result)
    assert refused.value.errno == errno.EPERM
    assert (query / result).stat().st_mtime_ns == before
