"""The README, pasted as a new user would: the demo command, then every ``sh`` block under
"Using it" in order, then the block under "Stopping" -- against a real server and a real
mount, in an empty home. Afterwards no mount and no process may be left behind.

Which blocks run is decided by the headings only (``## Using it``, ``## Stopping``) and
the fence language (```` ```sh ````), so other sections can change freely.

The home starts with the session's built store of the small test corpus in its data
directory (``KG_DEMO_MODULES`` names the same modules), so the demo takes its "already
built" path instead of embedding a corpus the session has already embedded with the same
command (``kg-fuse index --modules ...``, in ``tests.helpers.store``), and with the
built-in models' ONNX graphs (links to the ones set-up made) in its cache, so set-up
only checks them.
That an empty home sends the demo down its building path is checked on its own, cheaply.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
from kg_fuse.server.embedding import models
from tests.helpers.mount import fuse_available
from tests.helpers.store import OFFLINE_ENV, copy_store
from tests.readme.docs import README, ROOT, sections, sh_blocks

DEMO_MODULES = ",".join(SMALL_TEST_MODULES)  # what the seeded store was built from
PLAIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

needs_fuse = pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse")


def section(name: str) -> str:
    found = [body for heading, body in sections(README.read_text()).items()
             if heading.lower().startswith(name.lower())]
    assert found, f"README has no '## {name}' section"
    return found[0]


def test_the_readme_parser_finds_the_blocks() -> None:
    demo = [b for b in sh_blocks(section("Two commands")) if "demo.sh" in b]
    assert demo == ["./scripts/demo.sh\n"]
    assert len(sh_blocks(section("Using it"))) >= 2
    assert "server stop" in "".join(sh_blocks(section("Stopping")))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        command = raw.replace(b"\0", b" ").decode(errors="replace")
        if text in command and state != "Z":
            found.append(f"{entry.name}: {command}")
    return found


def mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(str(path))]


def demo_script() -> str:
    return (ROOT / "scripts" / "demo.sh").read_text()


def test_an_empty_home_sends_the_demo_down_its_building_path(tmp_path: Path) -> None:
    """The demo builds the corpus exactly when ``kg-fuse calibrate --show`` fails, and in
    an empty home it fails, naming the command that builds one, without creating a store."""
    script = demo_script()
    assert re.search(r'if "\$KG" calibrate --show .*\n(.*\n){1,3}.*"\$KG" index "\$\{CORPUS',
                     script), "demo.sh no longer builds when calibrate --show fails"
    env = {**os.environ, **OFFLINE_ENV, "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    shown = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "calibrate", "--show"],
                           env=env, capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode != 0
    assert "kg-fuse index" in shown.stderr + shown.stdout
    assert not (tmp_path / "data").exists()


def first_look(demo_output: str) -> str:
    """The commands the demo prints to try first: the indented lines after "A first look:"."""
    lines = demo_output.split("A first look:\n", 1)[1].splitlines()
    block = []
    for line in lines:
        if line and not line.startswith("  "):
            break
        block.append(line.strip())
    return "\n".join(block).strip() + "\n"


def demo_says(mountpoint: str) -> str:
    """What the demo prints once mounted at ``mountpoint``: its last part, run by bash."""
    script = demo_script()
    tail = script[script.index("path_hint=\"\""):]
    shown = subprocess.run(["bash", "-c", tail], capture_output=True, text=True, check=True,
                           env={**os.environ, "MNT": mountpoint, "BIN": os.environ["PATH"],
                                "started": "0"})
    return shown.stdout


def test_the_first_look_parser_finds_the_demos_block() -> None:
    block = first_look(demo_says("/root/kg"))
    assert block.startswith("cd /root/kg\n") and "mkdir" in block, block


def test_the_demo_s_commands_name_a_mountpoint_with_a_space_whole() -> None:
    """``./scripts/demo.sh "my kg"``: its ``cd`` and its stop command, pasted, act on
    ``my kg`` (they named ``my`` and ``kg`` apart)."""
    said = demo_says("/root/my kg")
    cd = first_look(said).splitlines()[0]
    stop = said.split("Stop everything (cd out of the mount first):", 1)[1].strip()
    assert shlex.split(cd) == ["cd", "/root/my kg"], cd
    assert shlex.split(stop.split("&&")[1]) == ["kg-fuse", "unmount", "/root/my kg"], stop


@pytest.mark.mount
@pytest.mark.timeout(900)
@needs_fuse
def test_demo_then_every_block_then_stop_leaves_nothing_behind(tmp_path: Path,
                                                               small_store: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    copy_store(small_store, home / ".local/share/kg-fuse/server/kg.sqlite3")
    (home / ".cache/kg-fuse/models").mkdir(parents=True)
    for name in models.BUILT_IN:
        made = models.ensure_graph(models.resolve(name))
        (home / ".cache/kg-fuse/models" / made.name).symlink_to(made)
    env = {"HOME": str(home), "PATH": PLAIN_PATH, "LANG": "C.UTF-8", "TERM": "dumb",
           "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_STATE_HOME": str(home / ".local/state"), "XDG_RUNTIME_DIR": str(tmp_path / "run"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "KG_DEMO_MODULES": DEMO_MODULES, "KG_DEMO_PORT": str(free_port()),
           # this checkout's code, also where the environment's editable install is another's
           "PYTHONPATH": str(ROOT)}
    (tmp_path / "run").mkdir()
    demo = [b for b in sh_blocks(section("Two commands")) if "demo.sh" in b][0]
    prologue = ["set -e", "trap 'echo \"FAILED: $BASH_COMMAND\" >&2' ERR"]
    try:
        shown = subprocess.run(["bash", "-c", "\n".join([*prologue, demo])], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=800)
        assert shown.returncode == 0, f"{shown.stderr[-3000:]}\n--- stdout ---\n{shown.stdout}"
        assert "the corpus is already built" in shown.stdout  # the seeded store was found
        # short: the calibration table is in the demo's log, not on the terminal
        assert "kg-fuse is mounted at" in shown.stdout
        assert "noise shape" not in shown.stdout
        assert "noise shape" in (home / ".local/share/kg-fuse/demo.log").read_text()
        assert len(shown.stdout.split("kg-fuse is mounted at", 1)[1].splitlines()) <= 20
        # the demo's first look, then the README's blocks: neither gets in the other's way
        script = "\n".join([*prologue, first_look(shown.stdout),
                            *sh_blocks(section("Using it")), *sh_blocks(section("Stopping"))])
        done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=800)
        out, err = done.stdout, shown.stderr + done.stderr
        assert done.returncode == 0, f"{err[-3000:]}\n--- stdout ---\n{out[-3000:]}"
        assert "zipfile" in out  # the first look listed results
        assert "gzip.compress.concept.md" in out  # ls, then ls -U | head showed results
        assert "# gzip.compress" in out  # cat of the result file
        assert "stopped the server" in out
        for line in err.splitlines():  # only the demo's progress may use stderr
            assert not re.search(r"error|denied|No such|busy|Traceback", line, re.I), line
    finally:
        leftover_mounts = mounts_under(home)
        leftover = processes_mentioning(str(home))
        for mountpoint in leftover_mounts:
            subprocess.run(["fusermount3", "-u", "-z", mountpoint], check=False)
        for line in leftover:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
    assert leftover_mounts == []
    assert leftover == []
    assert not list(home.glob(".local/share/kg-fuse/server/server.pid"))
