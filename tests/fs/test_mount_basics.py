"""Mounted: saved queries as directories, results as files (real FUSE, real server).

The logic behind these (sizes, read-only results, names, rmdir, remount) is checked
without a kernel in ``tests/core/test_core_queries.py``; what stays here is what only a
mount shows: the end-to-end path through the kernel, and the mount's lifecycle."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
import yaml

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

RELEVANT = "compress data with gzip"
GIBBERISH = "asdfgh qwerty zxcvb"


def result_files(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    head, _, _ = text[4:].partition("\n---\n")
    return yaml.safe_load(head)


def test_mkdir_lists_matching_concepts_and_cat_shows_them(mounted: Mount) -> None:
    query = mounted.path(RELEVANT)
    query.mkdir()
    assert RELEVANT in os.listdir(mounted.mountpoint)
    names = result_files(query)
    assert "gzip.compress.concept.md" in names, names
    body = (query / "gzip.compress.concept.md").read_text()
    meta = front_matter(body)
    assert meta["label"] == "gzip.compress"
    assert meta["id"] and 0 < meta["score"] <= 1
    assert isinstance(meta["ontologies"], list) and meta["ontologies"]
    assert "## Evidence" in body
    assert "## Relationships" in body


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_end_the_mount_with_status_zero(mount_factory, signum) -> None:
    mount = mount_factory()
    mount.path("csv").mkdir()
    assert mount.signal(signum) == 0
    assert not os.path.ismount(mount.mountpoint)


def test_fusermount_unmount_exits_zero(mount_factory) -> None:
    mount = mount_factory()
    os.listdir(mount.mountpoint)
    subprocess.run(["fusermount3", "-u", str(mount.mountpoint)], check=True)
    assert mount.wait() == 0
