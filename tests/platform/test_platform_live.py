"""kg-fuse mounted against the real knowledge-graph platform (issue #39): every scenario of
``tests.helpers.platform_scenarios`` on real mounts, recorded for the replay tier; and
what only a kernel shows: ``cp`` out of the mount, and the platform's own client
(kg-fuse 0.14.0) mounted beside ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.live_platform import ROOT, LiveRunner, LiveSession, mount_of
from tests.helpers.mount import Mount, wait_for
from tests.helpers.platform_scenarios import KITCHEN, SCENARIOS

UPSTREAM = os.environ.get("KG_FUSE_UPSTREAM")


def test_ingest(ingested: LiveSession) -> None:
    """The session's ontologies were made and filled through a mount (the ``ingest``
    scenario, run once for the session)."""
    if ingested.ingest_failure is not None:
        raise ingested.ingest_failure


@pytest.mark.parametrize("name", [name for name in SCENARIOS if name != "ingest"])
async def test_scenario(live: LiveRunner, name: str) -> None:
    await live.run(SCENARIOS[name])


@pytest.fixture
def our_mount(ingested: LiveSession, tmp_path: Path) -> Iterator[Mount]:
    """A mount of the platform signed in as its administrator (nothing recorded)."""
    if ingested.ingest_failure is not None:
        pytest.fail(f"the session's ingest failed: {ingested.ingest_failure!r}")
    mount = mount_of(ingested, tmp_path, 0, "admin").start()
    try:
        yield mount
    finally:
        status = mount.unmount() if mount.returncode is None else mount.returncode
        assert status == 0, mount.log_text()
        assert not mount.unexpected_log_lines(), mount.unexpected_log_lines()


def test_documents_copied_out_are_the_bytes_copied_in(ingested: LiveSession,
                                                      our_mount: Mount,
                                                      tmp_path: Path) -> None:
    documents = our_mount.path("ontology", ingested.names.kitchen, "documents")
    out = tmp_path / "copied"
    subprocess.run(["cp", "-r", f"{documents}/.", str(out)], check=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == KITCHEN


@pytest.fixture
def platform_client(ingested: LiveSession, tmp_path: Path
                    ) -> Iterator[tuple[Path, subprocess.Popen[bytes], Path]]:
    """The platform's own client, kg-fuse 0.14.0, mounted in the foreground straight on
    the platform, signed in as the contributor."""
    if not UPSTREAM:
        pytest.skip("KG_FUSE_UPSTREAM is not set (the path of the platform client's "
                    "kg-fuse executable; scripts/test.sh installs it)")
    mountpoint = tmp_path / "theirs"
    mountpoint.mkdir()
    env = {**os.environ, **{f"XDG_{kind}_HOME": str(tmp_path / f"up-{kind.lower()}")
                            for kind in ("CONFIG", "DATA", "STATE")},
           "XDG_RUNTIME_DIR": str(tmp_path / "up-run")}
    config = Path(env["XDG_CONFIG_HOME"], "kg")
    config.mkdir(parents=True)
    (config / "fuse.json").write_text(json.dumps({"mounts": {str(mountpoint): {
        "tags": {"enabled": True}}}}))
    client = ingested.clients["contributor"]
    log_path = tmp_path / "upstream.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [UPSTREAM, "mount", str(mountpoint), "--foreground", "--api-url",
             ingested.config.url, "--client-id", client.client_id,
             "--client-secret", client.client_secret],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: os.path.ismount(mountpoint) or process.poll() is not None,
                 timeout=60, what="the platform client's mount")
        assert process.poll() is None, log_path.read_text(errors="replace")
        yield mountpoint, process, log_path
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False,
                       stderr=subprocess.DEVNULL)
        process.terminate()  # it stays up after an unmount: asking it to go saves 15 s
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def kg_fuse(*args: str) -> subprocess.CompletedProcess[str]:
    """This checkout's ``kg-fuse`` command, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "kg_fuse.cli", *args], cwd="/",
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)


def test_the_platform_client_beside_ours(ingested: LiveSession, our_mount: Mount,
                                         platform_client) -> None:
    """Side by side on the same platform both list the ontology's documents alike;
    ``kg-fuse status`` and ``unmount`` refuse the platform client's mount (it also
    calls itself kg-fuse) and leave it mounted, its process running."""
    theirs, process, log_path = platform_client
    kitchen = ingested.names.kitchen
    listed = wait_for(lambda: sorted(n for n in os.listdir(theirs / "ontology" / kitchen
                                                            / "documents")
                                     if not n.startswith(".")),
                      what="the platform client's documents")
    assert listed == sorted(os.listdir(our_mount.path("ontology", kitchen, "documents")))
    assert listed == sorted(KITCHEN)

    ours = kg_fuse("status", str(our_mount.mountpoint))
    assert ours.returncode == 0, ours.stdout + ours.stderr
    problems = []
    for command in ("status", "unmount"):
        done = kg_fuse(command, str(theirs))
        said = (done.stdout + done.stderr).strip()
        if done.returncode != 1 or "is not a kg-fuse mount" not in said:
            problems.append(f"kg-fuse {command} THEIRS: exit {done.returncode}: {said}")
        if not os.path.ismount(theirs):
            problems.append(f"after kg-fuse {command}, THEIRS is no longer mounted")
            break
    if process.poll() is not None:
        problems.append(f"the platform client's process exited ({process.returncode})")
    assert not problems, f"THEIRS = {theirs}:\n" + "\n".join(problems)
    assert "Traceback" not in log_path.read_text(errors="replace")
