"""Kernel caches tell the truth: result files keep their inode and mtime while their
content is unchanged, a directory listing pages over one snapshot even while the listing
changes under it, lookup counts are honoured (an inode the kernel holds keeps working),
and the inode table shrinks back once the kernel forgets (drop_caches)."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mount import Mount
from tests.robustness.conftest import RELEVANT, result_names, wait_until

pytestmark = pytest.mark.mount


_GETDENTS64 = {"x86_64": 217, "aarch64": 61}.get(platform.machine())
_libc = ctypes.CDLL(None, use_errno=True)
PAGE = 2048  # a small getdents buffer: every page is one FUSE READDIRPLUS request
WIDE = "0.3"  # with a written .meta/limit, every match above it (no relevance cut)


def getdents(fd: int, size: int = PAGE) -> list[str]:
    """One getdents64(2) call: the names of one page of a directory listing.

    (Python's os.scandir asks for 32 KiB at a time, which recent kernels pass on to
    the filesystem whole; a small buffer makes the kernel page through the listing.)"""
    if _GETDENTS64 is None:
        pytest.skip(f"no getdents64 number for {platform.machine()}")
    buf = ctypes.create_string_buffer(size)
    n = _libc.syscall(_GETDENTS64, fd, buf, size)
    if n < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    names, pos, raw = [], 0, buf.raw
    while pos < n:
        reclen = struct.unpack_from("H", raw, pos + 16)[0]
        name = raw[pos + 19:pos + reclen].split(b"\0", 1)[0]
        names.append(os.fsdecode(name))
        pos += reclen
    return names


def scan_in_pages(directory: Path, between: Callable[[int], None] = lambda i: None
                  ) -> list[str]:
    """List a directory page by page, calling ``between(page)`` after each page."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names: list[str] = []
        page = 0
        while batch := getdents(fd):
            names += [n for n in batch if n not in (".", "..")]
            between(page)
            page += 1
        return names
    finally:
        os.close(fd)


def drop_caches() -> None:
    """Make the kernel forget every unused dentry and inode (it sends FORGETs)."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
    except OSError as exc:
        pytest.skip(f"cannot drop the kernel's caches: {exc}")


def inode_table_size(mount: Mount) -> int:
    fs = os.statvfs(mount.mountpoint)  # df -i's used inodes: the daemon's table
    return fs.f_files - fs.f_ffree


def identities(directory: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for name in result_names(directory):
        st = os.stat(directory / name)
        out[name] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return out


def set_threshold(mount: Mount, query: str, value: str) -> None:
    mount.path(query, ".meta", "threshold").write_text(value + "\n")


@pytest.mark.timeout(60)
def test_refetched_results_keep_their_inode_mtime_and_bytes(
        mount_factory: Callable[..., Mount], kg_admin: Any) -> None:
    mount = mount_factory(extra_args=["--max-age", "0.5"])
    query = mount.path(RELEVANT)
    query.mkdir()
    (query / ".meta" / "limit").write_text("50\n")  # a written limit: no relevance cut
    set_threshold(mount, RELEVANT, WIDE)
    first = identities(query)
    bodies = {n: (query / n).read_bytes() for n in first}
    searches = len(kg_admin.search_log(RELEVANT))
    for _ in range(3):
        time.sleep(0.6)  # older than --max-age: the next listing is fetched again
        assert identities(query) == first
        assert {n: (query / n).read_bytes() for n in first} == bodies
    assert len(kg_admin.search_log(RELEVANT)) >= searches + 3, "the listing was not refetched"
    # and a round trip through another threshold keeps the inodes of the ones that
    # stayed (their bytes change: each file's "Why" part names the threshold it passed)
    set_threshold(mount, RELEVANT, "0.6")
    narrower = identities(query)
    assert narrower and set(narrower) < set(first)
    assert all(narrower[n][0] == first[n][0] for n in narrower)
    set_threshold(mount, RELEVANT, WIDE)
    again = identities(query)
    assert set(again) == set(first)
    assert all(again[n][0] == first[n][0] for n in narrower)
    assert {n: (query / n).read_bytes() for n in first} == bodies  # as they were


# Regression test (a bug this suite found; fixed in c2157b9):
# mtime reused only from the previous set.
@pytest.mark.timeout(60)
def test_a_result_that_comes_back_unchanged_keeps_its_mtime(
        mount_factory: Callable[..., Mount]) -> None:
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    (query / ".meta" / "limit").write_text("50\n")  # a written limit: no relevance cut
    set_threshold(mount, RELEVANT, WIDE)
    first = identities(query)
    bodies = {n: (query / n).read_bytes() for n in first}
    set_threshold(mount, RELEVANT, "0.6")
    returning = set(first) - set(identities(query))
    assert returning
    time.sleep(0.01)
    set_threshold(mount, RELEVANT, WIDE)
    again = identities(query)
    assert {n: (query / n).read_bytes() for n in returning} == \
        {n: bodies[n] for n in returning}
    assert {n: again[n][1] for n in returning} == {n: first[n][1] for n in returning}


# Regression test (a bug this suite found; fixed in c2157b9):
# a forgotten result got a new inode number.
@pytest.mark.timeout(60)
def test_result_inodes_survive_the_kernel_forgetting_them(
        mount_factory: Callable[..., Mount]) -> None:
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    before = identities(query)
    drop_caches()
    wait_until(lambda: inode_table_size(mount) < len(before), timeout=5,
               message="the kernel forgetting the result files")
    after = identities(query)
    assert {n: v[1:] for n, v in after.items()} == {n: v[1:] for n, v in before.items()}
    assert after == before


@pytest.mark.timeout(60)
def test_readdir_pages_over_a_snapshot_while_the_listing_changes(
        mount_factory: Callable[..., Mount]) -> None:
    """One slow `ls` of a 100-entry directory reads its pages (one FUSE request per ~20
    entries) across a threshold change that replaces most of the listing: it sees the
    listing as it was when it started, each name exactly once."""
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    (query / ".meta" / "limit").write_text("100\n")
    set_threshold(mount, RELEVANT, "0")
    wide = sorted(os.listdir(query))
    assert len(wide) == 101  # .meta and 100 results
    set_threshold(mount, RELEVANT, "0.5")
    narrow = sorted(os.listdir(query))
    assert 1 < len(narrow) < 50
    set_threshold(mount, RELEVANT, "0")
    assert sorted(os.listdir(query)) == wide

    pages = []

    def change_once(page: int) -> None:
        pages.append(page)
        if page == 0:
            set_threshold(mount, RELEVANT, "0.5")  # the listing changes mid-scan...
            assert sorted(os.listdir(query)) == narrow  # ...and is refetched

    seen = scan_in_pages(query, change_once)
    assert len(pages) >= 4, "the listing was not read in several pages"
    assert len(seen) == len(set(seen)), "a name was listed twice"
    assert sorted(seen) == wide


@pytest.mark.timeout(90)
def test_concurrent_scans_each_see_one_whole_listing(
        mount_factory: Callable[..., Mount]) -> None:
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    (query / ".meta" / "limit").write_text("100\n")
    listings = {}
    for value in ("0", "0.5"):
        set_threshold(mount, RELEVANT, value)
        listings[value] = sorted(os.listdir(query))
    stop = threading.Event()
    errors: list[BaseException] = []

    def toggle() -> None:
        try:
            while not stop.is_set():
                for value in ("0", "0.5"):
                    set_threshold(mount, RELEVANT, value)
                    os.listdir(query)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    toggler = threading.Thread(target=toggle)
    toggler.start()
    scans = []
    try:
        deadline = time.monotonic() + 10
        while len(scans) < 40 and time.monotonic() < deadline:
            names = scan_in_pages(query, lambda page: time.sleep(0.003))
            scans.append(names)
    finally:
        stop.set()
        toggler.join(timeout=30)
    assert not errors, errors
    assert len(scans) >= 10
    for names in scans:
        assert len(names) == len(set(names)), "a name was listed twice"
        assert sorted(names) in listings.values(), "a listing mixed two snapshots"
    assert {len(s) for s in scans} == {len(v) for v in listings.values()}, \
        "the toggling never changed what a scan saw"


@pytest.mark.timeout(60)
def test_an_open_result_that_left_the_listing_keeps_working(
        mount_factory: Callable[..., Mount]) -> None:
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    names = result_names(query)
    last = names[-1]
    body = (query / last).read_bytes()
    ino = os.stat(query / last).st_ino
    with open(query / last, "rb") as held:
        set_threshold(mount, RELEVANT, "0.9")  # `last` drops out of the results
        assert last not in result_names(query)
        with pytest.raises(FileNotFoundError):
            os.stat(query / last)
        drop_caches()  # the kernel still holds the open inode: no FORGET for it
        st = os.fstat(held.fileno())
        assert st.st_ino == ino and st.st_size == len(body)
        assert held.read() == body
    set_threshold(mount, RELEVANT, "inherit")
    assert (query / last).read_bytes() == body


@pytest.mark.timeout(120)
def test_inode_table_shrinks_back_after_thousands_of_refreshes(
        mount_factory: Callable[..., Mount]) -> None:
    """Listings refreshed over and over (thresholds flipping, queries created and
    removed) grow the inode table only while the kernel holds the inodes: once it
    forgets them, the used inodes of statvfs() are back near their starting number."""
    mount = mount_factory()
    start = inode_table_size(mount)
    texts = ["gzip", "compressed data", "tar archives", "csv files", "json", "base64", "zip files",
             "bz2", "lzma", "shutil"]
    for text in texts:
        mount.path(text).mkdir()
        mount.path(text, ".meta", "limit").write_text("50\n")  # no relevance cut
        set_threshold(mount, text, "0")
    held_name = result_names(mount.path(texts[0]))[0]
    held_body = mount.path(texts[0], held_name).read_bytes()
    refreshes = 0
    peak = 0
    with open(mount.path(texts[0], held_name), "rb") as held:
        for round_ in range(12):
            for text in texts:  # each write invalidates, each listing refetches
                set_threshold(mount, text, "0" if round_ % 2 else "0.3")
                result_names(mount.path(text))
                refreshes += 1
            # a query that lives for one round (in words the corpus knows: at threshold
            # 0 it lists every concept scoring above 0, more than its limit of 50)
            extra = f"archive files round {round_}"
            mount.path(extra).mkdir()
            mount.path(extra, ".meta", "limit").write_text("50\n")
            set_threshold(mount, extra, "0")
            assert len(result_names(mount.path(extra))) == 50
            os.rmdir(mount.path(extra))
            peak = max(peak, inode_table_size(mount))
        # (a score of 0 is no match: at threshold 0 a query lists what scores above it)
        assert peak > 300, f"the kernel never held many inodes (peak {peak})"
        drop_caches()
        # the held file's inode stays; everything else may go
        settled = wait_until(lambda: (inode_table_size(mount) <= start + 20)
                             and inode_table_size(mount), timeout=10, interval=0.2,
                             message="the inode table shrinking after drop_caches")
        assert settled <= start + 20
        assert held.read() == held_body
        assert os.fstat(held.fileno()).st_size == len(held_body)
    # everything is still reachable after the kernel forgot it all
    for text in texts:
        names = result_names(mount.path(text))
        assert names
        with open(mount.path(text, names[0]), "rb") as f:
            assert f.read()
    with pytest.raises(OSError) as gone:
        os.stat(mount.path("round 0 scratch"))
    assert gone.value.errno == errno.ENOENT
    assert refreshes >= 100
