"""Command-line input never produces a traceback: one line, a proper exit code."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("argv", [["status", "/missing"], ["unmount", "/missing"],
                                  ["status", "/etc/passwd"], ["unmount", "/etc/passwd"],
                                  ["status", "/missing/\udcff"]])
def test_a_missing_or_odd_mountpoint_is_one_line_and_exit_1(argv, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": str(tmp_path),
           "XDG_DATA_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path),
           "XDG_STATE_HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "kg_fuse.cli", *argv], env=env,
                            capture_output=True, text=True, timeout=60, errors="replace")
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 1, output
    assert "Traceback" not in output
    assert len(output.splitlines()) == 1 and "not mounted" in output
