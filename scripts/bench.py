"""Benchmarks of kg-fuse under failure and at scale. Prints figures; asserts nothing.

    .venv/bin/python scripts/bench.py [options]

What it measures (each on real mounts of a real embedded server it starts itself):

1. Scale: ``--queries`` saved queries of ``--results`` results each (threshold 0, so
   every query lists exactly that many results from the small test corpus of ~345
   concepts) are created and listed, ``--workers`` at a time. Reported: the time to list
   them all, the daemon's resident memory (VmRSS from /proc/<pid>/status) before and
   after, and the inode-table size (the used inodes of ``statvfs(mountpoint)``,
   ``f_files - f_ffree``) after the listings and again after
   ``echo 2 > /proc/sys/vm/drop_caches`` made the kernel forget.
2. Latency, server stalled: a mount reaches the server through the fault-injecting
   proxy of ``tests/helpers/faults.py``, which then accepts requests and never answers.
   Every kind of operation is run ``--repeat`` times; the worst time and the outcome
   (ok or errno) are reported.
3. Latency, server down: the server process is stopped (connection refused) and the
   same operations are run against a mount that talks to it directly.

Options:
    --queries N        saved queries in the scale run (default 1000)
    --results N        results per query, written to each query's .meta/limit
                       (default 50; the small corpus has ~345 concepts)
    --workers N        concurrent listing threads in the scale run (default 8)
    --repeat N         runs of each operation in the latency runs (default 3)
    --timeout S        the mounts' --timeout, per HTTP call (default 5, the CLI default)
    --probe-timeout S  the mounts' --probe-timeout (default 2, the CLI default)
    --max-age S        the latency mounts' --max-age; listings older than this are
                       refetched, so "ls fetched" exercises the stale fallback (default 2)
    --skip-scale       skip part 1
    --skip-latency     skip parts 2 and 3
    --workdir DIR      where the server, mounts and logs live (default: a new temp dir)
    --keep             keep the work directory (logs) afterwards

Needs /dev/fuse and fusermount3; dropping the kernel's caches needs root (otherwise the
figure is reported as n/a). Building the server's corpus takes about half a minute.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import errno
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES  # noqa: E402
from tests.helpers.faults import FaultProxy, proxy_env  # noqa: E402
from tests.helpers.mount import Mount, fuse_available  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402

WORDS = ["gzip", "zlib", "csv", "json", "tar", "zip", "bz2", "lzma", "base64", "binary",
         "files", "paths", "archive", "compress", "decode", "encode", "read", "write",
         "stream", "checksum", "temporary", "copy", "match", "pattern", "config", "mime"]


# -- measuring ------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, str]:
    started = time.monotonic()
    try:
        fn()
    except OSError as exc:
        outcome = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    else:
        outcome = "ok"
    return time.monotonic() - started, outcome


def rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def drop_caches() -> bool:
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
    except OSError:
        return False
    return True


def inode_table(mount: Mount) -> int:
    fs = os.statvfs(mount.mountpoint)  # df -i's used inodes: the daemon's table
    return fs.f_files - fs.f_ffree


def settle(read: Callable[[], int], seconds: float = 3.0) -> int:
    """The value once it stopped falling (the kernel sends FORGETs asynchronously)."""
    deadline = time.monotonic() + seconds
    value = read()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = read()
        if now >= value:
            return now
        value = now
    return value


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("-" * len(line))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))


# -- the runs -------------------------------------------------------------------------------


def start_mount(workdir: Path, name: str, env: dict[str, str], args: list[str]) -> Mount:
    return Mount(workdir / f"mnt-{name}", env, workdir / f"kg-fuse-{name}.log", args).start()


def scale_run(server: KGServer, workdir: Path, opts: argparse.Namespace) -> list[list[str]]:
    env = {**os.environ, **server.env, "XDG_DATA_HOME": str(workdir / "data-scale")}
    mount = start_mount(workdir, "scale", env, [])
    rows: list[list[str]] = []
    try:
        assert mount.process is not None
        pid = mount.process.pid
        rss_start = rss_kib(pid)
        names = [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7 + 3) % len(WORDS)]} {i}"
                 for i in range(opts.queries)]
        started = time.monotonic()
        for name in names:
            mount.path(name).mkdir()
            mount.path(name, ".meta", "threshold").write_text("0\n")
            if opts.results != 50:  # the default limit
                mount.path(name, ".meta", "limit").write_text(f"{opts.results}\n")
        created = time.monotonic() - started

        def list_one(name: str) -> int:
            return sum(1 for n in os.listdir(mount.path(name)) if n.endswith(".concept.md"))

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(opts.workers) as pool:
            counts = list(pool.map(list_one, names))
        listed = time.monotonic() - started
        files = sum(counts)
        rss_listed = rss_kib(pid)
        inodes_listed = inode_table(mount)
        dropped = drop_caches()
        inodes_dropped = settle(lambda: inode_table(mount)) if dropped else None
        rss_dropped = rss_kib(pid)
        short = sum(1 for c in counts if c != opts.results)

        def mib(kib: int | None) -> str:
            return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"

        rows = [
            ["queries created (mkdir + write threshold)", f"{opts.queries}",
             f"{created:.1f} s"],
            ["queries listed", f"{opts.queries} ({opts.workers} threads)", f"{listed:.1f} s"],
            ["result files listed", f"{files}", f"{short} queries short of {opts.results}"],
            ["daemon VmRSS after mount", mib(rss_start), ""],
            ["daemon VmRSS after listing", mib(rss_listed),
             "" if rss_listed is None or rss_start is None or not files else
             f"+{(rss_listed - rss_start) * 1024 / files:.0f} B per result file"],
            ["daemon VmRSS after drop_caches", mib(rss_dropped), ""],
            ["inode table (used inodes) after listing", f"{inodes_listed}", ""],
            ["inode table (used inodes) after drop_caches",
             "n/a (not root)" if inodes_dropped is None else f"{inodes_dropped}", ""],
        ]
    finally:
        status = mount.unmount()
        rows.append(["daemon exit status after fusermount3 -u", f"{status}", ""])
    return rows


def operations(mount: Mount, fetched: str, file_name: str, rep: int
               ) -> list[tuple[str, Callable[[], Any]]]:
    meta = mount.path(fetched, ".meta")
    return [
        ("ls /", lambda: os.listdir(mount.mountpoint)),
        ("ls fetched query (expired: refetch, stale)", lambda: os.listdir(mount.path(fetched))),
        ("cat result file", lambda: mount.path(fetched, file_name).read_bytes()),
        ("stat result file", lambda: os.stat(mount.path(fetched, file_name))),
        ("ls never-fetched query", lambda: os.listdir(mount.path(f"never fetched {rep}"))),
        ("cat .meta/status", lambda: (meta / "status").read_bytes()),
        ("cat .meta/threshold", lambda: (meta / "threshold").read_bytes()),
        ("stat .meta/threshold", lambda: os.stat(meta / "threshold")),
        ("echo 0.5 > .meta/threshold", lambda: (meta / "threshold").write_text("0.5\n")),
        ("echo inherit > .meta/threshold",
         lambda: (meta / "threshold").write_text("inherit\n")),
        ("mkdir NAME", lambda: mount.path(f"new query {rep}").mkdir()),
        ("mkdir NAME@0.5 (creation probe)", lambda: mount.path(f"probed {rep}@0.5").mkdir()),
        ("rmdir NAME", lambda: os.rmdir(mount.path(f"new query {rep}"))),
    ]


def latency_run(mount: Mount, opts: argparse.Namespace, fault_on: Callable[[], None],
                fault_off: Callable[[], None] | None) -> dict[str, tuple[float, set[str]]]:
    fetched = "compress data with gzip"
    mount.path(fetched).mkdir()
    file_name = sorted(n for n in os.listdir(mount.path(fetched)) if n.endswith(".md"))[0]
    for rep in range(opts.repeat):
        mount.path(f"never fetched {rep}").mkdir()
    worst: dict[str, tuple[float, set[str]]] = {}
    for rep in range(opts.repeat):
        if fault_off is not None:
            fault_off()
            os.listdir(mount.path(fetched))  # fetched again, fresh
        time.sleep(opts.max_age + 0.2)  # ... and now expired
        fault_on()
        for what, op in operations(mount, fetched, file_name, rep):
            seconds, outcome = timed(op)
            before, outcomes = worst.get(what, (0.0, set()))
            worst[what] = (max(before, seconds), outcomes | {outcome})
            print(f"  {what}: {seconds:.2f} s {outcome}", file=sys.stderr)
    if fault_off is not None:
        fault_off()
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--results", type=int, default=50)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--probe-timeout", type=float, default=2.0)
    parser.add_argument("--max-age", type=float, default=2.0)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    opts = parser.parse_args(argv)
    if not fuse_available():
        print("bench: needs /dev/fuse and fusermount3", file=sys.stderr)
        return 2
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="kg-fuse-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)  # the mounts and the server run `python -m kg_fuse...` from here
    server = KGServer(workdir / "server", modules=SMALL_TEST_MODULES)
    proxy: FaultProxy | None = None
    mounts: list[Mount] = []
    try:
        print(f"bench: starting the embedded server in {workdir} ...", file=sys.stderr)
        started = time.monotonic()
        server.start()
        print(f"bench: server ready in {time.monotonic() - started:.0f} s", file=sys.stderr)
        if not opts.skip_scale:
            print(f"bench: scale run ({opts.queries} queries) ...", file=sys.stderr)
            rows = scale_run(server, workdir, opts)
            table(f"Scale: {opts.queries} queries x {opts.results} results",
                  ["measure", "value", "note"], rows)
        if not opts.skip_latency:
            args = ["--timeout", str(opts.timeout), "--probe-timeout", str(opts.probe_timeout),
                    "--max-age", str(opts.max_age)]
            proxy = FaultProxy(server.api_url).start()
            stalled_env = {**os.environ, **server.env, **proxy_env(server),
                           "XDG_DATA_HOME": str(workdir / "data-stalled")}
            stalled = start_mount(workdir, "stalled", stalled_env,
                                  ["--api-url", proxy.url, *args])
            mounts.append(stalled)
            down_env = {**os.environ, **server.env,
                        "XDG_DATA_HOME": str(workdir / "data-down")}
            down = start_mount(workdir, "down", down_env, args)
            mounts.append(down)
            print("bench: latency with the server stalled ...", file=sys.stderr)
            p = proxy
            stall = latency_run(stalled, opts, lambda: p.set_mode("stall"),
                                lambda: p.set_mode("pass"))
            print("bench: latency with the server down ...", file=sys.stderr)
            gone = latency_run(down, opts, server.stop, None)
            rows = [[what, f"{stall[what][0]:.2f}", "/".join(sorted(stall[what][1])),
                     f"{gone[what][0]:.2f}", "/".join(sorted(gone[what][1]))]
                    for what in stall]
            table(f"Worst latency in seconds over {opts.repeat} runs (--timeout "
                  f"{opts.timeout:g} --probe-timeout {opts.probe_timeout:g} --max-age "
                  f"{opts.max_age:g})",
                  ["operation", "stalled", "outcome", "down", "outcome"], rows)
            exits = []
            for mount in mounts:
                started = time.monotonic()
                status = mount.unmount()
                exits.append(f"{mount.mountpoint.name}: exit {status} in "
                             f"{time.monotonic() - started:.2f} s after fusermount3 -u")
            mounts.clear()
            print("\n" + "; ".join(exits))
    finally:
        for mount in mounts:
            mount.kill()
        if proxy is not None:
            proxy.stop()
        server.stop()
        if opts.keep:
            print(f"\nbench: logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
