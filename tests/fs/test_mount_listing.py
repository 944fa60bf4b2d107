"""Mounted: a listing is the answer. Through the kernel, `ls` of an inheriting query shows
the few files close to its best match, `ls -U` keeps their rank order, `.meta/status`
says where the listing was cut, and the write it suggests (a number to ``.meta/limit``)
lists everything above the threshold. The cut's rules are tested without a kernel in
``tests/core/test_core_cut.py``."""

from __future__ import annotations

import os
import subprocess

import pytest

from kg_fuse.listing.presets import PRESET_SIZES
from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

NARROW = "compress data with gzip"
BROAD = "compression"


def shell(command: str, cwd) -> str:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def status(mount: Mount, query: str) -> dict[str, str]:
    text = mount.path(query, ".meta", "status").read_text()
    return dict(line.split(": ", 1) for line in text.splitlines())


def test_ls_shows_the_answer_and_status_says_where_it_stopped(mounted: Mount) -> None:
    for query in (NARROW, BROAD):
        mounted.path(query).mkdir()
    narrow = shell(f'ls "{NARROW}"', mounted.mountpoint).split()
    broad = shell(f'ls "{BROAD}"', mounted.mountpoint).split()
    assert "gzip.compress.concept.md" in narrow
    assert 1 <= len(narrow) < len(broad) <= PRESET_SIZES["standard"]
    ranked = shell(f'ls -U "{NARROW}"', mounted.mountpoint).split()
    assert ranked[0] == "gzip.compress.concept.md"  # best first, as before the cut
    assert sorted(ranked) == sorted(narrow)
    lines = status(mounted, NARROW)
    depth = PRESET_SIZES["standard"] + 1  # the listing asks for its size and one more
    assert lines["cut"].startswith(f"after {len(narrow)} of at least {depth} matches")
    # the write the status suggests is the one that lists everything above the threshold
    assert lines["more"].startswith("write a number (up to 1000) to .meta/limit to list "
                                    "every match above the threshold")
    shell(f'echo 50 > "{NARROW}/.meta/limit"', mounted.mountpoint)
    everything = os.listdir(mounted.path(NARROW))
    assert len([n for n in everything if n.endswith(".concept.md")]) == 50
    assert set(narrow) < set(everything)
