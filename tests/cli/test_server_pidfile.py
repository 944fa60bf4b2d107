"""``kg-fuse server stop`` signals exactly the server its pid file names, nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_stop_never_signals_a_process_that_reused_the_pid(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        pid_file = tmp_path / "data" / "kg-fuse" / "server" / "server.pid"
        pid_file.parent.mkdir(parents=True)
        # a stale pid file whose pid now belongs to someone else (other start time)
        pid_file.write_text(json.dumps({"pid": bystander.pid, "started": 1,
                                        "api_url": "http://127.0.0.1:1", "log_file": ""}))
        env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
        result = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "server", "stop"],
                                env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0
        assert "no server is running" in result.stdout
        assert bystander.poll() is None  # still alive
        assert not pid_file.exists()  # the stale file is cleared
    finally:
        bystander.kill()
        bystander.wait()
