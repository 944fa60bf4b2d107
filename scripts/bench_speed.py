"""Speed benchmark of kg-fuse: every figure beside a reference measured in the same run.
Prints figures; asserts nothing.

    .venv/bin/python scripts/bench_speed.py [--repeat 5] [--idle 60] [--skip-scan]

References (this machine is shared: only the ratios mean something):
- server round trips: an HTTP server that answers from a raw asyncio socket (the floor
  of one request on this loopback), and the query's embedding time in this process;
- warm ``ls -l`` + ``cat`` over 20 queries x 50 results, and 8 parallel readers: a
  minimal in-memory pyfuse3 filesystem (``scripts/reffs.py``) serving the very bytes the
  kg-fuse mount served;
- first ``ls -l`` of a new query: one search round trip of the same request;
- the scan: the exact float32 scan (numpy) over the same synthetic vectors
  (``scripts/bench_scan.py``: isotropic and MiniLM-like, 100k and 1M rows).

The platform's own client (``kg-fuse`` 0.14.0 from PyPI) gets a column when
``KG_FUSE_UPSTREAM`` names its executable. It has our distribution name, so install it
in a venv of its own:

    python3 -m venv /tmp/up && /tmp/up/bin/pip install kg-fuse==0.14.0 && \\
        export KG_FUSE_UPSTREAM=/tmp/up/bin/kg-fuse
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES  # noqa: E402
from tests.helpers.mount import Mount, fuse_available  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402

TEXTS = ["gzip", "zlib checksums", "csv files", "json encoding", "tar archives", "zip files",
         "bz2 compression", "lzma", "base64", "binary data", "file paths", "temporary files",
         "copy files", "pattern matching", "config parsing", "mime types", "read lines",
         "write bytes", "stream reader", "compress data with gzip"]
FRESH = ["decompress a stream", "archive members", "checksum of bytes", "encode text",
         "open a file for writing", "parse dialects", "glob patterns"]
SEARCH_LINE = re.compile(r'"POST /query/search')


def p50(fn: Callable[[], object], n: int) -> float:
    fn()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.1f} ms"


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}x"


class ProcessMount(Mount):
    """A mount of any FUSE program (the reference filesystem, the upstream client)."""

    def __init__(self, mountpoint: Path, argv: list[str], env: dict[str, str], log: Path):
        super().__init__(mountpoint, env, log)
        self.argv = argv

    def start(self) -> ProcessMount:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while not os.path.ismount(self.mountpoint):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.argv[0]} did not mount:\n{self.log_text()}")
            time.sleep(0.05)
        return self


# -- the measures -----------------------------------------------------------------------


def warm_pass(dirs: list[Path]) -> int:
    """``ls -l`` + ``cat`` of every file: listdir, lstat each, read each."""
    files = 0
    for directory in dirs:
        for entry in os.scandir(directory):
            entry.stat(follow_symlinks=False)
            if entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as f:
                    f.read()
                files += 1
    return files


def shell_pass(dirs: list[Path]) -> None:
    """The shell's own ``ls -l`` of every directory, then ``cat`` of every file (what
    ``ls -l`` asks beyond ``lstat``: SELinux labels, ACLs, is included)."""
    names = " ".join(shlex.quote(str(d)) for d in dirs)
    subprocess.run(["sh", "-c", f"ls -l {names} > /dev/null && "
                    f"for d in {names}; do cat \"$d\"/*; done > /dev/null"], check=True)


def _reader(dirs: list[str]) -> int:
    return warm_pass([Path(d) for d in dirs])


def readers_throughput(dirs: list[Path], readers: int, rounds: int = 3) -> float:
    """Files read per second by ``readers`` processes, each doing ``rounds`` passes."""
    with multiprocessing.Pool(readers) as pool:
        pool.map(_reader, [[str(d) for d in dirs]] * readers)  # warm
        started = time.perf_counter()
        counts = pool.map(_reader, [[str(d) for d in dirs]] * (readers * rounds))
        return sum(counts) / (time.perf_counter() - started)


def server_round_trips(server: KGServer, repeat: int) -> list[list[str]]:
    from kg_fuse.server.embedding.embedder import Embedder

    floor = subprocess.Popen([sys.executable, "-c", FLOOR_SERVER], stdout=subprocess.PIPE)
    assert floor.stdout is not None
    floor_port = int(floor.stdout.readline())
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{floor_port}") as raw:
            floor_p50 = p50(lambda: raw.get("/"), repeat * 10)
    finally:
        floor.terminate()
        floor.wait()
    text = "compress data with gzip"
    with server.client("user") as http:
        found = http.post("/query/search", json={"query": "gzip", "limit": 1,
                                                 "min_similarity": 0}).json()
        concept = found["results"][0]["concept_id"]
        health = p50(lambda: http.get("/health"), repeat * 10)
        epoch = p50(lambda: http.get("/database/epoch"), repeat * 10)
        detail = p50(lambda: http.get(f"/query/concept/{concept}"), repeat * 10)
        embedder = Embedder()
        embedder.load()
        embedder.encode_one(text)
        searches, embeddings = [], []
        for _ in range(repeat * 4):  # interleaved, so both meet the same machine load
            searches.append(timed(lambda: http.post("/query/search",
                                                    json={"query": text, "limit": 50})))
            embeddings.append(timed(lambda: embedder.encode_one(text)))
        search, embed = statistics.median(searches), statistics.median(embeddings)
    return [
        ["GET /health p50", ms(health), f"raw HTTP floor {ms(floor_p50)}",
         ratio(health, floor_p50)],
        ["GET /database/epoch p50", ms(epoch), f"raw HTTP floor {ms(floor_p50)}",
         ratio(epoch, floor_p50)],
        ["GET /query/concept/{id} p50", ms(detail), f"raw HTTP floor {ms(floor_p50)}",
         ratio(detail, floor_p50)],
        ["POST /query/search p50 (50)", ms(search), f"embedding {ms(embed)}",
         f"+{(search - embed) * 1000:.1f} ms"],
    ]


FLOOR_SERVER = """
import asyncio, sys
BODY = (b'HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\n'
        b'content-length: 15\\r\\n\\r\\n{"status":"ok"}')
async def handle(reader, writer):
    try:
        while True:
            await reader.readuntil(b'\\r\\n\\r\\n')
            writer.write(BODY)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()
async def main():
    server = await asyncio.start_server(handle, '127.0.0.1', 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


def snapshot_tree(dirs: list[Path], path: Path) -> None:
    tree = {d.name: {f.name: base64.b64encode(f.read_bytes()).decode()
                     for f in sorted(d.iterdir()) if f.is_file()} for d in dirs}
    path.write_text(json.dumps(tree))


def searches_in_log(server: KGServer) -> int:
    return sum(1 for line in server.log_text().splitlines() if SEARCH_LINE.search(line))


def first_listing(mount: Mount, server: KGServer, repeat: int) -> list[str]:
    listing, search = [], []
    with server.client("user") as http:
        for text in FRESH[:repeat]:
            query = mount.path(text)
            query.mkdir()
            (query / ".meta" / "threshold").write_text("0\n")
            started = time.perf_counter()
            for entry in os.scandir(query):
                entry.stat(follow_symlinks=False)
            listing.append(time.perf_counter() - started)
            started = time.perf_counter()
            http.post("/query/search", json={"query": text, "limit": 50, "min_similarity": 0})
            search.append(time.perf_counter() - started)
    first, rtt = statistics.median(listing), statistics.median(search)
    return ["first ls -l of a new 50-result query", ms(first), f"search RTT {ms(rtt)}",
            f"+{(first - rtt) * 1000:.0f} ms"]


def filesystem_figures(server: KGServer, workdir: Path, opts: argparse.Namespace
                       ) -> list[list[str]]:
    env = {**os.environ, **server.env, "XDG_DATA_HOME": str(workdir / "data")}
    # --max-age 3600: the passes measure the kernel cache, not the refetch every listing
    # gets once it is --max-age (default 60 s) old
    ours = Mount(workdir / "mnt", env, workdir / "kg-fuse.log", ["--max-age", "3600"]).start()
    mounts: list[Mount] = [ours]
    try:
        dirs = [ours.path(t) for t in TEXTS]
        for d in dirs:
            d.mkdir()
            (d / ".meta" / "threshold").write_text("0\n")
        warm_pass(dirs)
        tree = workdir / "tree.json"
        snapshot_tree(dirs, tree)
        ref = ProcessMount(workdir / "ref", [sys.executable, str(ROOT / "scripts/reffs.py"),
                                             str(tree), str(workdir / "ref")],
                           dict(os.environ), workdir / "reffs.log").start()
        mounts.append(ref)
        ref_dirs = [ref.path(t) for t in TEXTS]
        columns: dict[str, list[Path]] = {"kg-fuse": dirs, "reference": ref_dirs}
        upstream = os.environ.get("KG_FUSE_UPSTREAM")
        if upstream:
            up = start_upstream(upstream, server, workdir)
            mounts.append(up)
            columns["upstream"] = [up.path(t) for t in TEXTS]
            for d in columns["upstream"]:
                d.mkdir()
        files = {name: warm_pass(ds) for name, ds in columns.items()}
        passes: dict[str, list[float]] = {name: [] for name in columns}
        shell: dict[str, list[float]] = {name: [] for name in columns}
        for ds in columns.values():
            shell_pass(ds)
        for _ in range(opts.repeat):  # interleaved: each column meets the same load
            for name, ds in columns.items():
                passes[name].append(timed(lambda ds=ds: warm_pass(ds)))
                shell[name].append(timed(lambda ds=ds: shell_pass(ds)))
        warm = {name: statistics.median(times) for name, times in passes.items()}
        sh = {name: statistics.median(times) for name, times in shell.items()}
        ones: dict[str, list[float]] = {name: [] for name in columns}
        scaling: dict[str, list[float]] = {name: [] for name in columns}
        for _ in range(opts.repeat):  # a ratio per round: both sides meet the same load
            for name, ds in columns.items():
                ones[name].append(readers_throughput(ds, 1))
                scaling[name].append(readers_throughput(ds, 8) / ones[name][-1])
        one = {name: statistics.median(values) for name, values in ones.items()}

        def spread(name: str) -> str:
            values = scaling[name]
            return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"

        rows = [["warm scandir+lstat+read, 20 dirs", ms(warm["kg-fuse"]),
                 f"reference {ms(warm['reference'])}", ratio(warm["kg-fuse"],
                                                             warm["reference"])],
                ["  files per pass", str(files["kg-fuse"]), str(files["reference"]), ""],
                ["warm shell ls -l + cat, 20 dirs", ms(sh["kg-fuse"]),
                 f"reference {ms(sh['reference'])}", ratio(sh["kg-fuse"], sh["reference"])],
                ["8 readers / 1 reader throughput", spread("kg-fuse"),
                 f"reference {spread('reference')}",
                 f"1 reader: {one['kg-fuse']:.0f} vs {one['reference']:.0f} files/s"]]
        if "upstream" in columns:
            rows += [["upstream 0.14.0: warm ls -l + cat", ms(warm["upstream"]),
                      f"{files['upstream']} files", ratio(warm["upstream"], warm["reference"])],
                     ["upstream 0.14.0: warm shell ls -l + cat", ms(sh["upstream"]), "",
                      ratio(sh["upstream"], sh["reference"])],
                     ["upstream 0.14.0: 8 readers / 1", spread("upstream"), "", ""]]
        rows.append(first_listing(ours, server, opts.repeat))
        before = searches_in_log(server)
        time.sleep(opts.idle)
        rows.append([f"searches by an idle mount in {opts.idle:g} s",
                     str(searches_in_log(server) - before), "(poll interval 5 s)", ""])
        return rows
    finally:
        for mount in mounts:
            try:
                mount.unmount()
            except Exception:  # noqa: BLE001 - the figures are printed anyway
                mount.kill()


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def start_upstream(executable: str, server: KGServer, workdir: Path) -> ProcessMount:
    home = workdir / "upstream-home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_DATA_HOME": str(home / ".local/share")}
    user = server.user
    argv = [executable, "mount", str(workdir / "upstream"), "--api-url", server.api_url,
            "--client-id", user["client_id"], "--client-secret", user["client_secret"],
            "--foreground"]
    return ProcessMount(workdir / "upstream", argv, env, workdir / "upstream.log").start()



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--skip-scan", action="store_true")
    parser.add_argument("--skip-fs", action="store_true")
    parser.add_argument("--workdir", type=Path)
    opts = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows: list[list[str]] = []
    if not opts.skip_scan:
        from bench_scan import scan_rows  # the server's scan: its own script too

        rows += scan_rows(opts.repeat * 3)
    if not opts.skip_fs:
        if not fuse_available():
            print("bench_speed: needs /dev/fuse and fusermount3", file=sys.stderr)
            return 2
        workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="kg-fuse-speed-"))
        os.chdir(ROOT)
        server = KGServer(workdir / "server", modules=SMALL_TEST_MODULES)
        try:
            server.start()
            rows += server_round_trips(server, opts.repeat)
            rows += filesystem_figures(server, workdir, opts)
        finally:
            server.stop()
            if not opts.workdir:
                shutil.rmtree(workdir, ignore_errors=True)
    load = " ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(load_before, os.getloadavg(),
                                                      strict=True))
    print(f"load average (1, 5, 15 min) at start/end: {load}; medians of {opts.repeat} "
          "runs; CPU per FUSE operation: scripts/profile_ops.py")
    from bench_scan import print_table
    print_table(["measure", "kg-fuse", "reference (same run)", "ratio / difference"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
