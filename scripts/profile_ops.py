"""CPU per FUSE operation: the kg-fuse daemon beside the reference filesystem, on the
same warm workloads. Prints a table; asserts nothing.

    .venv/bin/python scripts/profile_ops.py [--repeat 5] [--workdir DIR]

Both filesystems run in their own processes with every handler of their ``Operations``
class wrapped by a counter (calls, CPU time of the handler's thread while it ran). CPU
time, not wall time, so other processes on a busy machine do not inflate the figures; a
handler that awaits also counts the other tasks that ran meanwhile (none on the warm
paths measured here). "outside handlers" is the process's CPU time minus the handlers':
pyfuse3, libfuse, trio and the system calls that receive and answer each request.

Workloads, each run ``--repeat`` times, interleaved between the two filesystems:
- ``scandir``: the benchmark's warm pass (``os.scandir`` + ``lstat`` + read every file);
- ``ls -l + cat``: the shell's ``ls -l`` of the 20 directories, then ``cat`` of every file.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import resource
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

OPS = ("lookup", "forget", "getattr", "setattr", "readlink", "mknod", "mkdir", "unlink",
       "rmdir", "symlink", "rename", "link", "open", "read", "write", "flush", "release",
       "fsync", "opendir", "readdir", "releasedir", "fsyncdir", "statfs", "setxattr",
       "getxattr", "listxattr", "removexattr", "access", "create")
STATS_ENV = "KG_FUSE_OPSTATS"


# -- inside the filesystem process ------------------------------------------------------


class OpCounter:
    def __init__(self) -> None:
        self.ops: dict[str, list[int]] = {}  # op -> [calls, cpu ns]

    def wrap(self, name: str, fn: Callable) -> Callable:
        record = self.ops.setdefault(name, [0, 0])
        clock = time.thread_time_ns
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def timed_async(*args, **kwargs):  # type: ignore[no-untyped-def]
                started = clock()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    record[0] += 1
                    record[1] += clock() - started
            return timed_async

        @functools.wraps(fn)
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            started = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                record[0] += 1
                record[1] += clock() - started
        return timed

    def instrument(self, cls: type) -> None:
        for name in OPS:
            setattr(cls, name, self.wrap(name, getattr(cls, name)))

    def instrument_at_init(self) -> None:
        """Instrument the ``Operations`` class of whatever filesystem this process hands
        to ``pyfuse3.init`` (the kg-fuse daemon's or the reference's), before it serves."""
        import pyfuse3

        init = pyfuse3.init

        def counted_init(operations: object, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.instrument(type(operations))
            return init(operations, *args, **kwargs)

        pyfuse3.init = counted_init

    def dump(self, path: str) -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        data = {"ops": self.ops, "process_cpu_ns": int((usage.ru_utime + usage.ru_stime) * 1e9)}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)


def serve(kind: str, argv: list[str]) -> int:
    """Run a filesystem with counters; SIGUSR2 writes them to $KG_FUSE_OPSTATS."""
    counter = OpCounter()
    path = os.environ[STATS_ENV]
    signal.signal(signal.SIGUSR2, lambda *_: counter.dump(path))
    counter.instrument_at_init()
    if kind == "kg":
        from kg_fuse.cli import main as kg_main

        return kg_main(argv)
    import reffs

    sys.argv = ["reffs", *argv]
    return reffs.main()


# -- the harness --------------------------------------------------------------------------


class Column:
    def __init__(self, name: str, mount: object, dirs: list[Path], stats: Path) -> None:
        self.name, self.mount, self.dirs, self.stats = name, mount, dirs, stats

    def snapshot(self) -> dict:
        """The daemon's counters now (a handshake: the file appears once written)."""
        self.stats.unlink(missing_ok=True)
        self.mount.process.send_signal(signal.SIGUSR2)  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while not self.stats.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no counters written")
            time.sleep(0.005)
        return json.loads(self.stats.read_text())


def measure(column: Column, workload: Callable[[list[Path]], object]) -> dict:
    before = column.snapshot()
    started = time.perf_counter()
    workload(column.dirs)
    wall = time.perf_counter() - started
    after = column.snapshot()
    ops = {op: [a[0] - before["ops"][op][0], a[1] - before["ops"][op][1]]
           for op, a in after["ops"].items()}
    return {"ops": ops, "cpu": after["process_cpu_ns"] - before["process_cpu_ns"],
            "wall": wall}


def summarise(runs: list[dict]) -> dict:
    """Medians over the runs: calls and CPU per op, process CPU and wall per pass."""
    ops = {op: (statistics.median(r["ops"][op][0] for r in runs),
                statistics.median(r["ops"][op][1] for r in runs)) for op in runs[0]["ops"]}
    return {"ops": ops, "cpu": statistics.median(r["cpu"] for r in runs),
            "wall": statistics.median(r["wall"] for r in runs)}


def table(title: str, ours: dict, ref: dict) -> list[str]:
    header = ["op", "calls", "us/call", "ms/pass", "ref calls", "ref us/call", "ref ms/pass"]
    rows = []
    for op in OPS:
        calls, cpu = ours["ops"].get(op, (0, 0))
        rcalls, rcpu = ref["ops"].get(op, (0, 0))
        if not calls and not rcalls:
            continue
        rows.append([op, f"{calls:g}", f"{cpu / calls / 1e3:.1f}" if calls else "-",
                     f"{cpu / 1e6:.2f}", f"{rcalls:g}",
                     f"{rcpu / rcalls / 1e3:.1f}" if rcalls else "-", f"{rcpu / 1e6:.2f}"])
    handlers = sum(c for _, c in ours["ops"].values())
    rhandlers = sum(c for _, c in ref["ops"].values())
    calls = sum(n for n, _ in ours["ops"].values())
    rcalls = sum(n for n, _ in ref["ops"].values())
    rows += [["all handlers", f"{calls:g}", "", f"{handlers / 1e6:.2f}", f"{rcalls:g}", "",
              f"{rhandlers / 1e6:.2f}"],
             ["outside handlers", "", f"{(ours['cpu'] - handlers) / max(calls, 1) / 1e3:.1f}",
              f"{(ours['cpu'] - handlers) / 1e6:.2f}", "",
              f"{(ref['cpu'] - rhandlers) / max(rcalls, 1) / 1e3:.1f}",
              f"{(ref['cpu'] - rhandlers) / 1e6:.2f}"],
             ["process CPU", "", "", f"{ours['cpu'] / 1e6:.2f}", "", "",
              f"{ref['cpu'] / 1e6:.2f}"],
             ["wall per pass", "", "", f"{ours['wall'] * 1e3:.1f}", "", "",
              f"{ref['wall'] * 1e3:.1f}"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [title, "  ".join(h.rjust(w) if i else h.ljust(w)
                              for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    lines += ["  ".join(c.rjust(w) if i else c.ljust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True)))
              for row in rows]
    lines.append(f"  CPU ratio {ours['cpu'] / ref['cpu']:.2f}x, wall ratio "
                 f"{ours['wall'] / ref['wall']:.2f}x (kg-fuse / reference)")
    return lines


def profile(workdir: Path, repeat: int, server_env: dict[str, str] | None) -> list[str]:
    from bench_speed import TEXTS, ProcessMount, shell_pass, snapshot_tree, warm_pass

    from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
    from tests.helpers.server import KGServer

    server = None if server_env else KGServer(workdir / "server", modules=SMALL_TEST_MODULES)
    me = [sys.executable, str(Path(__file__).resolve()), "--serve"]
    mounts = []
    try:
        if server is not None:
            server.start()
            server_env = server.env
        env = {**os.environ, **server_env, "XDG_DATA_HOME": str(workdir / "data"),
               STATS_ENV: str(workdir / "kg.stats")}
        ours = ProcessMount(workdir / "mnt", [*me, "kg", "mount", str(workdir / "mnt"),
                                              "--foreground", "--max-age", "3600",
                                              "--log-file", str(workdir / "kg-fuse.log")],
                            env, workdir / "kg-fuse.out").start()
        mounts.append(ours)
        dirs = [ours.path(t) for t in TEXTS]
        for d in dirs:
            d.mkdir()
            (d / ".meta" / "threshold").write_text("0\n")
        warm_pass(dirs)
        snapshot_tree(dirs, workdir / "tree.json")
        ref = ProcessMount(workdir / "ref", [*me, "ref", str(workdir / "tree.json"),
                                             str(workdir / "ref")],
                           {**os.environ, STATS_ENV: str(workdir / "ref.stats")},
                           workdir / "reffs.log").start()
        mounts.append(ref)
        columns = [Column("kg-fuse", ours, dirs, workdir / "kg.stats"),
                   Column("reference", ref, [ref.path(t) for t in TEXTS],
                          workdir / "ref.stats")]
        lines = []
        for title, workload in (("scandir + lstat + read (the benchmark's warm pass)",
                                 warm_pass), ("shell: ls -l + cat", shell_pass)):
            for column in columns:
                workload(column.dirs)  # warm
            runs: dict[str, list[dict]] = {c.name: [] for c in columns}
            for _ in range(repeat):
                for column in columns:
                    runs[column.name].append(measure(column, workload))
            lines += table(title, summarise(runs["kg-fuse"]), summarise(runs["reference"]))
            lines.append("")
        return lines
    finally:
        for mount in reversed(mounts):
            try:
                mount.unmount()
            except Exception:  # noqa: BLE001 - the figures are printed anyway
                mount.kill()
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        return serve(argv[1], argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--server-env", type=Path,
                        help="JSON of the environment (XDG_*) of a running embedded server "
                             "to use instead of starting one")
    opts = parser.parse_args(argv)
    workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="kg-fuse-ops-"))
    workdir.mkdir(parents=True, exist_ok=True)
    os.chdir(ROOT)
    load = os.getloadavg()
    server_env = json.loads(opts.server_env.read_text()) if opts.server_env else None
    lines = profile(workdir, opts.repeat, server_env)
    print(f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; medians of "
          f"{opts.repeat} passes; CPU per operation from the daemons' own counters\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
