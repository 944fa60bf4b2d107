#!/usr/bin/env python3
"""Concurrent against sequential searches over HTTP, and the server's resident memory
after 60 searches, on a real server over a built store. Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_parallel.py STORE.sqlite3 [--concurrent 8] [--rounds 10]
    .venv/bin/python scripts/bench_parallel.py STORE.sqlite3 --reference OTHER_CHECKOUT

Each server (this checkout's, and with ``--reference`` another checkout's, e.g. the code
before a change made with ``git archive``) is started over its own copy of the store
and first answers ``--searches`` different queries one after another; its resident
memory (VmRSS) is read then. Then, ``--rounds`` times, ``--concurrent`` new queries are
sent one after another (each waits for the answer before the next is sent) and another
``--concurrent`` new queries all at once, one connection each; which goes first
alternates. Every query is sent once per server, so each pays for its embedding as a
new query does; servers take turns round by round, so a shared machine's load hits
them alike. Queries are the shipped eval sets' (relevant and gibberish).

Prints per server: the median wall time of a sequential and of a concurrent batch, their
ratio (how many times faster the concurrent batch finished), and the memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from kg_fuse.eval import sets  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402

SETS = ("stdlib", "heldout", "stdlib-questions", "stdlib-everyday", "stdlib-questions-heldout",
        "stdlib-everyday-heldout")


def queries() -> list[str]:
    found: list[str] = []
    for name in SETS:
        qset = sets.load(name)
        found += [q.text for q in qset.relevant] + qset.gibberish
    return list(dict.fromkeys(found))


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise KeyError("VmRSS")


class Target:
    """One server and its clients: one connection per concurrent search, kept open."""

    def __init__(self, name: str, server: KGServer, width: int) -> None:
        self.name, self.server = name, server
        self.clients = [server.client() for _ in range(width)]
        self.sequential: list[float] = []
        self.concurrent: list[float] = []

    def search(self, client: httpx.Client, query: str) -> None:
        response = client.post("/query/search", json={"query": query})
        response.raise_for_status()

    def one_after_another(self, batch: list[str]) -> float:
        started = time.perf_counter()
        for query in batch:
            self.search(self.clients[0], query)
        return time.perf_counter() - started

    def all_at_once(self, batch: list[str]) -> float:
        ready = threading.Barrier(len(batch) + 1)
        errors: list[BaseException] = []

        def send(client: httpx.Client, query: str) -> None:
            ready.wait()
            try:
                self.search(client, query)
            except BaseException as exc:  # reported after the batch
                errors.append(exc)

        threads = [threading.Thread(target=send, args=(c, q))
                   for c, q in zip(self.clients, batch, strict=False)]
        for thread in threads:
            thread.start()
        ready.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return time.perf_counter() - started

    def close(self) -> None:
        for client in self.clients:
            client.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path, help="a built store (kg.sqlite3)")
    ap.add_argument("--reference", type=Path, action="append", default=[],
                    help="another checkout of kg-fuse to measure side by side (repeatable)")
    ap.add_argument("--concurrent", type=int, default=8, help="searches per batch")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--searches", type=int, default=60,
                    help="searches before the memory is read")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args()
    os.environ["KG_TEST_ZYGOTE"] = "0"  # each server a fresh interpreter of its own code
    pool = queries()
    needed = args.searches + 2 * args.rounds * args.concurrent
    if needed > len(pool):
        ap.error(f"{needed} different queries needed, the eval sets have {len(pool)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kg-fuse-parallel-"))
    codes = [("this checkout", ROOT)] + [(f"reference {p}", p.resolve())
                                         for p in args.reference]
    targets: list[Target] = []
    try:
        for i, (name, code) in enumerate(codes):
            # PYTHONSAFEPATH: ``python -m`` would put the working directory first on
            # sys.path, and a checkout there would be the code every server ran
            server = KGServer(workdir / f"server-{i}", seed=args.store,
                              env={"PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"})
            print(f"starting {name} ...", file=sys.stderr)
            server.start()
            targets.append(Target(name, server, args.concurrent))
        memory: dict[str, tuple[float, float]] = {}
        for target in targets:
            assert target.server.process is not None
            pid = target.server.process.pid
            started = rss_mib(pid)
            target.one_after_another(pool[:args.searches])
            time.sleep(1.0)
            memory[target.name] = (started, rss_mib(pid))
        rest = pool[args.searches:]
        for r in range(args.rounds):
            first = rest[2 * r * args.concurrent:(2 * r + 1) * args.concurrent]
            second = rest[(2 * r + 1) * args.concurrent:(2 * r + 2) * args.concurrent]
            for target in targets:
                if r % 2:
                    target.concurrent.append(target.all_at_once(first))
                    target.sequential.append(target.one_after_another(second))
                else:
                    target.sequential.append(target.one_after_another(first))
                    target.concurrent.append(target.all_at_once(second))
        print(f"{args.rounds} rounds of {args.concurrent} new queries one after another and "
              f"{args.concurrent} all at once; load {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")
        print(f"{'server':<40} {'seq ms':>7} {'conc ms':>8} {'ratio':>6} "
              f"{'RSS start':>10} {f'after {args.searches}':>10}")
        for target in targets:
            seq = statistics.median(target.sequential)
            conc = statistics.median(target.concurrent)
            start, after = memory[target.name]
            print(f"{target.name[-40:]:<40} {seq * 1e3:>7.1f} {conc * 1e3:>8.1f} "
                  f"{seq / conc:>5.2f}x {start:>6.1f} MiB {after:>6.1f} MiB")
    finally:
        for target in targets:
            target.close()
            target.server.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
