"""``kg-fuse systemd install``: one unit per mount (every one), each accepted by systemd."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kg_fuse.systemd import escape_path

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze missing (scripts/setup.sh "
                                          "installs the systemd package)")


def install(tmp_path: Path, *args: str) -> tuple[Path, str]:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    result = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "systemd", "install", *args],
                            env=env, capture_output=True, text=True, timeout=60, check=True)
    return tmp_path / "config" / "systemd" / "user", result.stdout


@needs_analyze
def test_every_mount_gets_an_enabled_unit_that_systemd_accepts(tmp_path: Path) -> None:
    mounts = [tmp_path / "kg", tmp_path / "notes and 100% more", tmp_path / "kg-2"]
    units, out = install(tmp_path, *(a for m in mounts for a in ("--mount", str(m))))
    names = sorted(p.name for p in units.glob("*.service"))
    expected = sorted(["kg-fuse-server.service",
                       *(f"kg-fuse-mount-{escape_path(m)}.service" for m in mounts)])
    assert names == expected
    wants = units / "default.target.wants"
    assert sorted(p.name for p in wants.iterdir()) == expected  # all enabled, not just one
    assert all((wants / n).resolve() == (units / n).resolve() for n in names)
    for mount in mounts:
        assert mount.is_dir()  # created, so the unit can mount at login
        text = (units / f"kg-fuse-mount-{escape_path(mount)}.service").read_text()
        assert "After=kg-fuse-server.service" in text
        assert '"--foreground"' in text
    assert "systemctl --user start" in out
    verify = subprocess.run(["systemd-analyze", "verify", "--man=no",
                             *(str(units / n) for n in names)],
                            capture_output=True, text=True, timeout=60, cwd=units)
    assert verify.returncode == 0, verify.stderr
    assert verify.stderr.strip() == "", verify.stderr


@needs_analyze
def test_the_verify_check_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: systemd-analyze rejects what systemd would not start."""
    broken = tmp_path / "broken.service"
    broken.write_text("[Service]\nExecStart=kg-fuse mount\n")
    verify = subprocess.run(["systemd-analyze", "verify", "--man=no", str(broken)],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode != 0


def test_escaping_matches_systemd(tmp_path: Path) -> None:
    if shutil.which("systemd-escape") is None:
        pytest.skip("systemd-escape missing")
    for path in ("/home/ann/kg", "/tmp/a b/c-d", "/x/.hidden/ü%", "/"):
        expected = subprocess.run(["systemd-escape", "--path", path], capture_output=True,
                                  text=True, check=True).stdout.strip()
        assert escape_path(Path(path)) == expected


def test_api_url_mounts_without_a_server_unit_and_uninstall_removes_all(
        tmp_path: Path) -> None:
    units, _ = install(tmp_path, "--api-url", "https://kg.example.org", "--mount",
                       str(tmp_path / "remote"))
    assert [p.name for p in units.glob("kg-fuse-server*")] == []
    (unit,) = units.glob("kg-fuse-mount-*.service")
    assert '"--api-url" "https://kg.example.org"' in unit.read_text()
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    subprocess.run([sys.executable, "-m", "kg_fuse.cli", "systemd", "uninstall"], env=env,
                   check=True, capture_output=True, timeout=60)
    assert list(units.glob("*.service")) == []
    assert list((units / "default.target.wants").iterdir()) == []
