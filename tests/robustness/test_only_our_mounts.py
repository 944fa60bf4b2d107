"""`kg-fuse unmount` and `status` act only on kg-fuse's own mounts, recognised by the
filesystem type the mount table gives them, not by their path: any other filesystem is
refused in one line with exit status 1 and left as it was (unmounting it could lose its
data), while a kg-fuse mount whose process died is still recognised and cleaned up."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.mount import Mount
from tests.robustness.conftest import kg_fuse_cli, wait_until

pytestmark = pytest.mark.mount


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs holding a file: somebody else's filesystem, with data in it."""
    where = tmp_path / "tmpfs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "kg-test-tmpfs", str(where)], check=True)
    (where / "precious.txt").write_text("keep me")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def refused(result: subprocess.CompletedProcess[str], path: Path) -> None:
    assert result.returncode == 1, result
    assert result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kg-fuse: "), result.stderr
    assert f"{path} is not a kg-fuse mount" in lines[0], lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(60)
def test_unmount_refuses_another_filesystem_and_leaves_it_mounted(tmpfs: Path) -> None:
    for args in (["unmount", str(tmpfs)], ["unmount", "--stop-server", str(tmpfs)]):
        refused(kg_fuse_cli(*args), tmpfs)
        assert os.path.ismount(tmpfs)
        assert (tmpfs / "precious.txt").read_text() == "keep me"


@pytest.mark.timeout(60)
def test_status_says_mounted_only_of_a_kg_fuse_mount(tmpfs: Path,
                                                     mounted: Mount) -> None:
    for other in (tmpfs, Path("/proc")):
        refused(kg_fuse_cli("status", str(other)), other)
    ours = kg_fuse_cli("status", str(mounted.mountpoint))
    assert ours.returncode == 0, ours
    assert ours.stdout.splitlines()[0] == f"{mounted.mountpoint}: mounted", ours
    # through a relative path and a symlink, it is the same mount
    link = mounted.mountpoint.parent / "link-to-mount"
    link.symlink_to(mounted.mountpoint)
    assert kg_fuse_cli("status", str(link)).returncode == 0


@pytest.mark.timeout(60)
def test_a_dead_kg_fuse_mount_is_still_recognised_and_cleaned(
        mount_factory: Callable[..., Mount]) -> None:
    mount = mount_factory()
    assert mount.process is not None
    mount.process.kill()
    assert mount.wait() == -9
    status = wait_until(lambda: (lambda s: s if "dead" in s.stdout else None)(
        kg_fuse_cli("status", str(mount.mountpoint))), timeout=5, interval=0.05,
        message="kg-fuse status saying dead")
    assert status.returncode == 1  # type: ignore[attr-defined]
    done = kg_fuse_cli("unmount", str(mount.mountpoint))
    assert done.returncode == 0, done
    assert not os.path.ismount(mount.mountpoint)
    after = kg_fuse_cli("status", str(mount.mountpoint))
    assert after.returncode == 1 and "not mounted" in after.stdout, after
