"""Does the daemon's memory come back? Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_memory.py [--queries 1000] [--results 50]

On a real mount of a real embedded server (the small test corpus), it creates
``--queries`` saved queries at threshold 0 (each lists exactly ``--results`` files),
lists them all, ``--workers`` at a time, then:

1. makes the kernel forget every inode (``echo 2 > /proc/sys/vm/drop_caches``, root only);
2. removes every query (``rmdir``) and makes the kernel forget again.

After each step it prints the daemon's resident memory (VmRSS from /proc/<pid>/status)
and the inode table's size (the used inodes of ``statvfs(mountpoint)``). The reference is the same
daemon's RSS right after mounting, in the same run.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench import WORDS, drop_caches, inode_table, rss_kib, settle, table  # noqa: E402

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES  # noqa: E402
from tests.helpers.mount import Mount, fuse_available  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402
from tests.helpers.store import STORE_CACHE, built_store  # noqa: E402


def settled_rss(pid: int, seconds: float = 2.0) -> int:
    """RSS once the daemon had a moment to finish what the last step started."""
    time.sleep(seconds)
    return rss_kib(pid) or 0


def run(server: KGServer, workdir: Path, opts: argparse.Namespace) -> list[list[str]]:
    env = {**os.environ, **server.env, "XDG_DATA_HOME": str(workdir / "data-mount")}
    mount = Mount(workdir / "mnt", env, workdir / "kg-fuse.log").start()
    assert mount.process is not None
    pid = mount.process.pid
    rows: list[list[str]] = []

    def mib(kib: int) -> str:
        return f"{kib / 1024:.1f} MiB"

    def row(step: str, kib: int, inodes: int | None, note: str = "") -> None:
        ratio = f"{kib / start:.2f}x" if start else ""
        rows.append([step, mib(kib), ratio, "n/a" if inodes is None else str(inodes), note])

    try:
        start = settled_rss(pid, 0.5)
        row("after mount (reference)", start, inode_table(mount))
        names = [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} {i}"
                 for i in range(opts.queries)]
        for name in names:
            mount.path(name).mkdir()
            mount.path(name, ".meta", "threshold").write_text("0\n")
            if opts.results != 50:
                mount.path(name, ".meta", "limit").write_text(f"{opts.results}\n")
        row(f"after creating {opts.queries} queries", settled_rss(pid), inode_table(mount))

        def list_one(name: str) -> int:
            return sum(1 for n in os.listdir(mount.path(name)) if n.endswith(".concept.md"))

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(opts.workers) as pool:
            files = sum(pool.map(list_one, names))
        listed = time.monotonic() - started
        row(f"after listing ({files} files)", settled_rss(pid), inode_table(mount),
            f"{listed:.0f} s to list")
        if drop_caches():
            inodes = settle(lambda: inode_table(mount))
            row("after the kernel forgot (drop_caches)", settled_rss(pid), inodes)
        else:
            row("after the kernel forgot (drop_caches)", rss_kib(pid) or 0, None, "not root")
        started = time.monotonic()
        for name in names:
            mount.path(name).rmdir()
        removed = time.monotonic() - started
        row(f"after rmdir of all {opts.queries}", settled_rss(pid), inode_table(mount),
            f"{removed:.0f} s to remove")
        if drop_caches():
            inodes = settle(lambda: inode_table(mount))
            row("after rmdir + drop_caches", settled_rss(pid), inodes)
    finally:
        status = mount.unmount()
        rows.append(["daemon exit status after fusermount3 -u", str(status), "", "", ""])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--results", type=int, default=50)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--port", type=int, help="the embedded server's port (default: free)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    opts = parser.parse_args(argv)
    if not fuse_available():
        print("bench_memory: needs /dev/fuse and fusermount3", file=sys.stderr)
        return 2
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="kg-fuse-memory-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)
    server = KGServer(workdir / "server", modules=SMALL_TEST_MODULES,
                      seed=built_store(STORE_CACHE))
    if opts.port:
        server.port = opts.port
    try:
        print(f"bench_memory: starting the embedded server in {workdir} ...", file=sys.stderr)
        server.start()
        rows = run(server, workdir, opts)
        table(f"Daemon memory: {opts.queries} queries x {opts.results} results",
              ["step", "VmRSS", "vs mount", "inode table", "note"], rows)
    finally:
        server.stop()
        if opts.keep:
            print(f"\nbench_memory: logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
