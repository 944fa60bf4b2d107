"""The short version of ``scripts/soak.py``: 35 seconds of ingests into two ontologies,
two mounts reading queries, default changes, a graceful restart and a ``kill -9`` in the
middle of an ingest. Nothing the server acknowledged is lost, no user sees an error while
the server is up, and both mounts are alive at the end."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.store import STORE_CACHE, built_store

pytestmark = pytest.mark.mount

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 35  # the run itself; the server's first start and the checks add ~20 s


def test_a_short_day_of_use_loses_nothing_and_leaves_both_mounts_alive(
        tmp_path: Path) -> None:
    # built here, not by the small_store fixture: that would start this process's own
    # server zygote, importing torch while the soak's server starts
    built_store(STORE_CACHE)
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "soak.py"), "--seconds", str(SECONDS),
         "--report-every", "10", "--work", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert re.search(r"graceful restart \(SIGTERM: exit status 0\); healthy again", out), out
    assert "kill -9 in the middle of an ingest (job job_" in out, out
    acknowledged = [int(n) for n in re.findall(r"files copied, (\d+) acknowledged", out)]
    assert len(acknowledged) == 2 and min(acknowledged) > 0, out  # both ontologies
    assert "acknowledged ingests lost: 0\n" in out, out
    assert "files copied but not ingested at the end: 0\n" in out, out
    assert "documents a live mount does not show: 0\n" in out, out
    assert "uploads again, as a job asked, that were duplicates: 0\n" in out, out
    assert re.search(r"errors a user saw outside the restart/kill windows \(\+\d+ s\): 0\n",
                     out), out
    assert "mounts alive at the end: 2 of 2\n" in out, out
    assert out.rstrip().endswith("result: PASS"), out
