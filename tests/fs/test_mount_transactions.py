"""Mounted: a control file write is a transaction. A refused write changes nothing (value,
listing, mtimes); a valid one commits once, at close; mtimes move only with values."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time

import pytest

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

QUERY = "compress data with gzip"
WRITABLE = ["threshold", "limit", "exclude", "union"]
VALID = {"threshold": "0.52\n", "limit": "7\n", "exclude": "zlib\n", "union": "tar\n"}
INVALID = {"threshold": "1.5\n", "limit": "0\n", "exclude": "bad\x01term\n",
           "union": "x" * 600 + "\n"}


def sh(command: str, cwd, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def listing(mount: Mount) -> list[str]:
    return sorted(n for n in os.listdir(mount.path(QUERY)) if n.endswith(".concept.md"))


def server_searches(kg_admin) -> int:
    return len(kg_admin.search_log(QUERY))


@pytest.fixture
def meta(mounted: Mount):
    mounted.path(QUERY).mkdir()
    return mounted.path(QUERY, ".meta")


@pytest.mark.parametrize("name", WRITABLE)
def test_refused_write_after_a_valid_one_leaves_everything_as_it_was(mounted, meta, name):
    control = meta / name
    assert sh(f"printf {VALID[name]!r} > {name}", meta).returncode == 0
    before_text, before_stat = control.read_bytes(), control.stat()
    before_list = listing(mounted)
    time.sleep(0.02)
    with pytest.raises(OSError) as exc, open(control, "w") as f:  # O_TRUNC, then refused
        f.write(INVALID[name])
    assert exc.value.errno == errno.EINVAL
    assert control.read_bytes() == before_text
    after = control.stat()
    assert (after.st_mtime_ns, after.st_size) == (before_stat.st_mtime_ns, before_stat.st_size)
    assert listing(mounted) == before_list


def test_shell_echo_of_an_invalid_threshold_fails_and_keeps_the_value(mounted, meta):
    assert sh("echo 0.72 > threshold", meta).returncode == 0
    result = sh("echo 1.5 > threshold", meta)
    assert result.returncode != 0
    assert "Invalid argument" in result.stderr
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.72"


def commits(mount: Mount) -> list[str]:
    return [line.split(": ", 2)[-1] for line in mount.log_text().splitlines()
            if f"query {QUERY!r}: " in line]


def test_a_valid_write_commits_once(mounted, meta, kg_admin):
    assert sh("echo 0.7 > threshold", meta).returncode == 0
    before = len(commits(mounted))
    assert sh("echo 0.6 > threshold", meta).returncode == 0
    # one commit, at 0.6; none at an intermediate "inherit" (the shell's O_TRUNC)
    assert commits(mounted)[before:] == ["threshold set to 0.6"]
    listing(mounted)


@pytest.mark.parametrize("command", [": > threshold", "truncate -s 0 threshold"])
def test_clearing_is_durable_when_the_command_returns(mounted, meta, command):
    assert sh("echo 0.7 > threshold", meta).returncode == 0
    assert sh(command, meta).returncode == 0
    assert (meta / "threshold").read_text().splitlines()[-1] == "inherit"


@pytest.mark.parametrize("name", WRITABLE)
def test_mtime_moves_only_when_the_value_does(mounted, meta, name):
    control = meta / name
    assert sh(f"printf {VALID[name]!r} > {name}", meta).returncode == 0
    first = control.stat().st_mtime_ns
    time.sleep(0.02)
    assert sh(f"printf {VALID[name]!r} > {name}", meta).returncode == 0  # same value
    assert control.stat().st_mtime_ns == first
    # an editor's scratch file created and removed next to it changes nothing either
    (meta / "4913").write_bytes(b"")
    (meta / "4913").unlink()
    (meta / f".{name}.swp").write_bytes(b"x")
    (meta / f".{name}.swp").unlink()
    assert control.stat().st_mtime_ns == first


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.parametrize("extra", ["", "-c 'set backupcopy=yes'", "-c 'set nowritebackup'"])
def test_vim_saves_without_its_changed_since_reading_warning(mounted, meta, extra):
    # Two saves in one session: the second warns if the first changed the file's
    # mtime behind vim's back (removing its scratch file used to).
    # vim's swap file (.threshold.swp) is created next to the file after vim read it
    script = ("vim -Es -u NONE -i NONE -c 'set directory=.' " + extra +
              " -c 'silent! %s/^inherit$/0.55/' -c 'w' "
              "-c 'silent! %s/^0.55$/0.56/' -c 'w' -c 'qa!' threshold; echo rc=$?")
    result = sh(script, meta)
    assert "changed since reading" not in result.stdout + result.stderr, result
    assert "rc=0" in result.stdout, result
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.56"


def test_a_megabyte_to_exclude_is_refused_quickly_and_others_keep_listing(mounted, meta):
    # distinct terms: the old de-duplication was quadratic and ran on the event loop
    big = mounted.mountpoint.parent / "exclude-1mb"
    big.write_bytes("".join(f"term{i}\n" for i in range(120_000)).encode()[:1 << 20])
    started = time.monotonic()
    result = sh(f"cat {str(big)!r} > exclude", meta, timeout=30)  # two minutes before
    assert result.returncode != 0 and "File too large" in result.stderr, result
    elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    assert (meta / "exclude").read_text() == ""
    assert listing(mounted) is not None
