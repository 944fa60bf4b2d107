#!/usr/bin/env python3
"""What a listing costs, beside another checkout's code in the same run: the first
``ls -l`` of a new query (the search, the listed concepts' details, every file rendered)
and a warm one, through real mounts of real servers. Also checks that every listed
file's size is exact (``stat`` size == bytes read). Beside each first listing's wall
time, the CPU time its server and its mount spent on it (their threads' ``schedstat``):
on a shared machine it moves far less with the load than the wall time. Prints figures;
asserts nothing.

    .venv/bin/python scripts/bench_listing.py STORE.sqlite3 --reference OTHER_CHECKOUT \\
        [--rounds 40]

Each checkout (this one, and the ``--reference``, e.g. the code before a change made
with ``git archive``) runs its own server over its own copy of the store and its own
mount, each a fresh interpreter of its own code. Round by round, one new query (from the
shipped eval sets: every server embeds it as a new query) is made with ``mkdir`` and
listed with ``ls -l`` under each mount, the order alternating, so a shared machine's
load hits both alike; then listed again warm. Measured against itself (the same code
as the reference) the side started first came out 1.07x to 1.12x slower: run it both
ways (``--reference-first``) and read the two ratios together. Prints the p50 of each,
per checkout, and this checkout's as a ratio to the reference's. On two cores under a
load of 12, the same code on both sides gave wall-time ratios from 0.72x to 1.05x and
CPU ratios from 0.94x to 1.03x in one run: compare several runs of each order.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kg_fuse.eval import sets  # noqa: E402
from tests.helpers.mount import Mount  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402

SETS = ("stdlib", "heldout", "stdlib-questions", "stdlib-everyday")


def queries() -> list[str]:
    found: list[str] = []
    for name in SETS:
        found += [q.text for q in sets.load(name).relevant]
    return [q for q in dict.fromkeys(found) if "/" not in q and not q.startswith(".")]


def ls_l(path: Path) -> int:
    """``ls -l``: the names, and each one's attributes."""
    count = 0
    for entry in os.scandir(path):
        entry.stat(follow_symlinks=False)
        count += 1
    return count


def timed(fn: object, *args: object) -> float:
    started = time.perf_counter()
    fn(*args)  # type: ignore[operator]
    return time.perf_counter() - started


def cpu_ns(pid: int) -> int:
    """The CPU time a process's threads have run so far, in ns (``schedstat``: exact,
    where ``/proc/PID/stat`` counts 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total


def sizes_wrong(path: Path) -> tuple[int, int]:
    """How many listed files' ``stat`` size differs from the bytes read, of how many."""
    files = [p for p in path.iterdir() if p.name.endswith(".concept.md")]
    return sum(p.stat().st_size != len(p.read_bytes()) for p in files), len(files)


class Side:
    """One checkout's server and mount, and what was measured on it."""

    def __init__(self, name: str, code: Path, store: Path, work: Path) -> None:
        self.name = name
        code_env = {"PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"}
        self.server = KGServer(work / "server", seed=store, env=code_env)
        self.server.start()
        env = {**os.environ, **self.server.env, **code_env,
               "XDG_DATA_HOME": str(work / "data")}
        self.mount = Mount(work / "mnt", env, work / "kg-fuse.log",
                           ["--max-age", "3600"]).start()
        assert self.server.process is not None and self.mount.process is not None
        self.pids = (self.server.process.pid, self.mount.process.pid)
        self.first: list[float] = []
        self.first_cpu: list[float] = []  # the server's and the mount's, during it
        self.warm: list[float] = []
        self.wrong = self.files = 0

    def round(self, text: str) -> None:
        query = self.mount.path(text)
        query.mkdir()
        cpu = sum(map(cpu_ns, self.pids))
        self.first.append(timed(ls_l, query))
        self.first_cpu.append((sum(map(cpu_ns, self.pids)) - cpu) / 1e9)
        self.warm.append(timed(ls_l, query))
        wrong, files = sizes_wrong(query)
        self.wrong += wrong
        self.files += files

    def stop(self) -> None:
        self.mount.unmount()
        self.server.stop()


def ratio(ours: list[float], ref: list[float]) -> str:
    """The p50s' ratio, and the median of the per-query ratios (the warm-up left out)."""
    each = [a / b for a, b in zip(ours[1:], ref[1:], strict=True)]
    return (f"{statistics.median(ours[1:]) / statistics.median(ref[1:]):.3f}x (median of "
            f"per-query ratios {statistics.median(each):.3f}x)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path, help="a built store (kg.sqlite3)")
    ap.add_argument("--reference", type=Path, required=True,
                    help="another checkout of kg-fuse, measured side by side")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--reference-first", action="store_true",
                    help="start the reference's server and mount first (the harness "
                         "favours the side started last by a few percent: run both ways)")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    os.environ["KG_TEST_ZYGOTE"] = "0"  # each a fresh interpreter of its own code
    pool = queries()[:args.rounds]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kg-fuse-listing-"))
    sides: list[Side] = []
    try:
        order = [("this checkout", ROOT), ("reference", args.reference.resolve())]
        for i, (name, code) in enumerate(order[::-1] if args.reference_first else order):
            print(f"starting {name} ...", file=sys.stderr)
            sides.append(Side(name, code, args.store, workdir / f"side-{i}"))
        if args.reference_first:
            sides.reverse()  # reported as this checkout, then the reference
        for side in sides:  # a first listing each: connections, tokens, the default
            side.round("warm up")
        for r, text in enumerate(pool):
            for side in sides if r % 2 else reversed(sides):
                side.round(text)
        print(f"{len(pool)} new queries, ls -l first and warm; load "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"{'checkout':<16} {'first p50':>10} {'first CPU':>10} {'warm p50':>9} "
              f"{'sizes exact':>14}")
        for side in sides:
            print(f"{side.name:<16} {statistics.median(side.first[1:]) * 1e3:>7.1f} ms "
                  f"{statistics.median(side.first_cpu[1:]) * 1e3:>7.1f} ms "
                  f"{statistics.median(side.warm[1:]) * 1e3:>6.2f} ms "
                  f"{side.files - side.wrong:>6}/{side.files}")
        ours, ref = sides
        print(f"this checkout / reference: first ls -l p50 {ratio(ours.first, ref.first)}, "
              f"CPU {ratio(ours.first_cpu, ref.first_cpu)}; warm "
              f"{statistics.median(ours.warm[1:]) / statistics.median(ref.warm[1:]):.3f}x")
    finally:
        for side in sides:
            side.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
