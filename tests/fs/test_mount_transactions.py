"""Mounted: a control file write is a transaction. A refused write changes nothing (value,
listing, mtimes); a valid one commits once, at close; mtimes move only with values."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

QUERY = "compress data with gzip"
WRITABLE = ["threshold", "limit", "exclude", "union"]
VALID = {"threshold": "0.52\n", "limit": "7\n", "exclude": "zlib\n", "union": "tar\n"}
INVALID = {"threshold": "1.5\n", "limit": "0\n", "exclude": "bad\x01term\n",
           "union": "x" * 600 + "\n"}


def sh(command: str, cwd, timeout: float = 60, env: dict[str, str] | None = None
       ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


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


@pytest.mark.parametrize("command", [
    ": > threshold", "truncate -s 0 threshold", "cat /dev/null > threshold",
    "python3 -c 'open(\"threshold\", \"w\").close()'",
])
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


# -- whatever processes hold the descriptor ----------------------------------------------
# ``cmd > f``: the shell opens f (O_TRUNC) and every process that inherits the descriptor
# closes it, each close a flush: a child that exits before the command writes must not
# turn "nothing written yet" into "empty", which is "inherit" for the threshold.

PICK_THRESHOLD = """#!/bin/sh
# picks a threshold the way scripts do: other programs first, each a forked child
level=$(echo "$1")
/bin/true
echo "$level"
"""

PYTHON_SHIM = """#!/bin/sh
# a version manager's shim: it looks the interpreter up first (a forked child)
version=$(echo 3)
exec "$REAL_PYTHON" "$@"
"""

TWO_WRITERS = """
import os, sys
# two workers share the command's standard output, the control file; one after the other
for text in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:
        try:
            os.write(1, text.encode())
        except OSError as exc:
            os.write(2, f"worker: {exc.strerror}\\n".encode())
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def executable(path, text: str):
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("name", WRITABLE)
def test_a_child_that_exits_before_the_write_leaves_the_value(mounted, meta, name):
    control = meta / name
    assert sh(f"printf {VALID[name]!r} > {name}", meta).returncode == 0
    before_text, before_mtime = control.read_bytes(), control.stat().st_mtime_ns
    result = sh(f"{{ /bin/true; printf {INVALID[name]!r}; }} > {name}", meta)
    assert result.returncode != 0 and "Invalid argument" in result.stderr, result
    assert control.read_bytes() == before_text
    assert control.stat().st_mtime_ns == before_mtime


def test_the_issue_s_forking_command_keeps_the_threshold(mounted, meta):
    assert sh("echo 0.5 > threshold", meta).returncode == 0
    result = sh("sh -c '/bin/true; printf \"word\\n\"' > threshold", meta)
    assert result.returncode != 0, result  # dash says only "I/O error"
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.5"
    # one process, a valid value then a refused one: the close commits nothing either
    assert sh("{ echo 0.6; echo word; } > threshold", meta).returncode != 0
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.5"


def test_a_forking_script_sets_the_value_once_and_a_refused_one_changes_nothing(
        mounted, meta, tmp_path):
    script = executable(tmp_path / "pick-threshold.sh", PICK_THRESHOLD)
    assert sh("echo 0.5 > threshold", meta).returncode == 0
    before = len(commits(mounted))
    assert sh(f"{script} 0.45 > threshold", meta).returncode == 0
    assert commits(mounted)[before:] == ["threshold set to 0.45"]  # no "inherit" first
    assert sh(f"{script} word > threshold", meta).returncode != 0
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.45"
    assert commits(mounted)[before:] == ["threshold set to 0.45"]


def test_two_writers_on_one_descriptor(mounted, meta, tmp_path):
    script = tmp_path / "two-writers.py"
    script.write_text(TWO_WRITERS)
    run = f"{sys.executable} {script}"
    assert sh("echo 0.5 > threshold", meta).returncode == 0
    # the first has nothing to say, the second's value is refused: nothing changes
    result = sh(f"{run} '' 'word\n' > threshold", meta)
    assert "worker: Invalid argument" in result.stderr, result
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.5"
    # the first's value holds; the second's refused write does not undo it
    result = sh(f"{run} '0.61\n' 'word\n' > threshold", meta)
    assert "worker: Invalid argument" in result.stderr, result
    assert (meta / "threshold").read_text().splitlines()[-1] == "0.61"


@pytest.mark.parametrize(("name", "before", "program"), [
    ("exclude", "keep\n", 'print("t" * 501)'),
    ("threshold", "0.5\n", 'print("word")'),
])
def test_a_refused_value_through_a_launcher_shim_leaves_the_value(
        mounted, meta, tmp_path, name, before, program):
    shims = tmp_path / "shims"
    shims.mkdir()
    executable(shims / "python3", PYTHON_SHIM)
    env = {"PATH": f"{shims}:{os.environ['PATH']}", "REAL_PYTHON": sys.executable}
    control = meta / name
    control.write_text(before)
    shown = control.read_bytes()
    result = sh(f"python3 -c '{program}' > {name}", meta, env=env)
    assert result.returncode != 0 and "Invalid argument" in result.stderr, result
    assert control.read_bytes() == shown
