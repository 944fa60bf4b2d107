"""Mounted: saved queries as directories, results as files (real FUSE, real server)."""

from __future__ import annotations

import errno
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


def test_ls_l_sizes_are_exact(mounted: Mount) -> None:
    query = mounted.path(RELEVANT)
    query.mkdir()
    for name in result_files(query):
        with open(query / name, "rb") as f:
            data = f.read()
        assert os.stat(query / name).st_size == len(data), name


def test_result_files_are_read_only(mounted: Mount) -> None:
    query = mounted.path(RELEVANT)
    query.mkdir()
    name = result_files(query)[0]
    with pytest.raises(PermissionError):
        open(query / name, "w").close()
    os.unlink(query / name)  # accepted, so that rm -r QUERY is quiet; changes nothing
    assert name in result_files(query)


def test_gibberish_lists_nothing_at_the_calibrated_default(mounted: Mount) -> None:
    mounted.path(GIBBERISH).mkdir()
    assert result_files(mounted.path(GIBBERISH)) == []
    assert sorted(os.listdir(mounted.path(GIBBERISH, ".meta"))) == [
        "exclude", "limit", "query.toml", "status", "threshold", "union"]


def test_rmdir_removes_the_query(mounted: Mount) -> None:
    mounted.path("zlib checksums").mkdir()
    os.rmdir(mounted.path("zlib checksums"))
    assert "zlib checksums" not in os.listdir(mounted.mountpoint)
    assert not mounted.path("zlib checksums").exists()


def test_mkdir_twice_is_eexist(mounted: Mount) -> None:
    mounted.path("tar archives").mkdir()
    with pytest.raises(FileExistsError):
        mounted.path("tar archives").mkdir()


@pytest.mark.parametrize(
    "name", [b"\xff\xfe", b".hidden", b"query@1.5", b"@0.5", b"tab\there"]
)
def test_bad_names_are_refused_and_the_mount_survives(mounted: Mount, name: bytes) -> None:
    path = os.path.join(os.fsencode(mounted.mountpoint), name)
    with pytest.raises(OSError) as exc:
        os.mkdir(path)
    assert exc.value.errno == errno.EINVAL
    assert not os.path.exists(path)
    mounted.path("still alive").mkdir()
    assert "still alive" in os.listdir(mounted.mountpoint)


def test_lookup_of_undecodable_name_is_enoent(mounted: Mount) -> None:
    with pytest.raises(OSError) as exc:
        os.stat(os.path.join(os.fsencode(mounted.mountpoint), b"\xff"))
    assert exc.value.errno in (errno.ENOENT, errno.EINVAL)
    assert os.listdir(mounted.mountpoint) == ["ontology"]


def test_queries_and_overrides_survive_a_remount(mount_factory) -> None:
    first = mount_factory()
    first.path("json parsing").mkdir()
    first.path("bz2 files@0.7").mkdir()
    (first.path("json parsing", ".meta", "threshold")).write_text("0.55\n")
    assert first.unmount() == 0
    second = mount_factory(mountpoint=first.mountpoint, state_of=first)
    assert sorted(os.listdir(second.mountpoint)) == ["bz2 files@0.7", "json parsing", "ontology"]
    assert second.path("json parsing", ".meta", "threshold").read_text().splitlines()[-1] \
        == "0.55"
    toml = second.path("bz2 files@0.7", ".meta", "query.toml").read_text()
    assert 'query = "bz2 files"' in toml


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
