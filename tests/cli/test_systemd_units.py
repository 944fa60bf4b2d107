"""``kg-fuse systemd install``: one unit per mount (every one), each accepted by systemd."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kg_fuse.cli import build_parser
from kg_fuse.systemd import escape_path

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze missing (scripts/setup.sh "
                                          "installs the systemd package)")


def install(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> tuple[Path, str]:
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data"), **(env or {})}
    result = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "systemd", "install", *args],
                            env=env, capture_output=True, text=True, timeout=60, check=True,
                            cwd=cwd)
    return tmp_path / "config" / "systemd" / "user", result.stdout


def verify(units: Path) -> None:
    """``systemd-analyze verify`` accepts every unit written, without a word."""
    verified = subprocess.run(["systemd-analyze", "verify", "--man=no",
                               *(str(p) for p in sorted(units.glob("*.service")))],
                              capture_output=True, text=True, timeout=60, cwd=units)
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr.strip() == "", verified.stderr


def unit_lines(unit: Path, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in unit.read_text().splitlines()
            if line.startswith(f"{key}=")]


def exec_argv(unit: Path) -> list[str]:
    """The ExecStart command line as systemd splits it (no % or $ in these tests)."""
    (line,) = unit_lines(unit, "ExecStart")
    return shlex.split(line)


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


@needs_analyze
def test_the_units_run_what_the_user_ran(tmp_path: Path) -> None:
    """The units used to carry only XDG_DATA/CONFIG/STATE_HOME and KG_API_URL: the model's
    cache (XDG_CACHE_HOME), KG_WORDNET_DIR and the server's port were lost, the server
    ran plain ``serve`` on 8765, and a relative --mount became relative to the cwd."""
    work = tmp_path / "work"
    (work / "notes").mkdir(parents=True)
    (tmp_path / "real").mkdir()
    (work / "linked").symlink_to(tmp_path / "real")
    user_env = {"XDG_CACHE_HOME": str(tmp_path / "cache"),
                "KG_WORDNET_DIR": str(tmp_path / "wordnet dict"),
                "KG_FUSE_SERVER_TOKEN_TTL": "600",
                "KG_CLIENT_ID": "kgfuse-user-0123456789ab",
                "KG_CLIENT_SECRET": "s3cret-not-for-units"}
    units, out = install(tmp_path, "--mount", "notes/../kg", "--mount", "linked/kg2",
                         "--port", "18123", "--data-dir", "store", "--modules", "gzip,json",
                         "--ingest", "notes", env=user_env, cwd=work)
    server = units / "kg-fuse-server.service"
    argv = exec_argv(server)
    assert argv[:4] == [sys.executable, "-m", "kg_fuse.cli", "serve"]
    served = build_parser().parse_args(argv[3:])
    assert served.port == 18123 and served.modules == ["gzip", "json"]
    assert served.data_dir == work / "store" and served.ingest == [work / "notes"]
    mounts = {Path(exec_argv(u)[-1]): u for u in units.glob("kg-fuse-mount-*.service")}
    assert sorted(mounts) == sorted([work / "kg", tmp_path / "real" / "kg2"])
    for mountpoint, unit in mounts.items():
        assert f"(mounts {mountpoint})" in out
        mounted = build_parser().parse_args(exec_argv(unit)[3:])
        assert mounted.api_url == "http://127.0.0.1:18123"
        assert mounted.data_dir == work / "store"
        assert mounted.client_id == user_env["KG_CLIENT_ID"]
        secret = mounted.client_secret_file
        assert secret.read_text().strip() == user_env["KG_CLIENT_SECRET"]
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    for unit in [server, *mounts.values()]:
        text = unit.read_text()
        assert "s3cret" not in text
        carried = dict(line.strip('"').split("=", 1) for line in unit_lines(unit, "Environment"))
        for name in ("XDG_CACHE_HOME", "KG_WORDNET_DIR", "KG_FUSE_SERVER_TOKEN_TTL"):
            assert carried[name] == user_env[name], (unit, name)
        assert "KG_CLIENT_SECRET" not in carried
    verify(units)
