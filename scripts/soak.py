"""A day of use in ten minutes: is everything still there, and still up, at the end?

    .venv/bin/python scripts/soak.py [--minutes 10] [--port N] [--work DIR]

Starts a real embedded server over a copy of the small test corpus's store and mounts it
twice (``kg-fuse mount``), then, all at once for ``--minutes``:

- one user per mount copies Markdown notes into ``ontology/NAME/ingest/`` (two
  ontologies) and follows each file's ``.ingesting`` job file;
- one user per mount makes saved queries, lists them, reads results and ``.meta/status``;
- an administrator raises the server's default threshold and puts it back, three times;
- the server is restarted gracefully (SIGTERM, then started on the same data and port),
  and later killed with SIGKILL while a long document is being embedded, then started.

It prints a line every ``--report-every`` seconds and, at the end: the server's resident
memory over time and whether it stays within 10% once warm (``--warmup`` seconds of each
server process are left out), the acknowledged ingests lost (a job the server reported
completed whose document the server does not hold at the end; each must also be shown in
``documents/`` by every live mount), the errors a user saw while the server was up
(outside a restart or kill and the few seconds the mounts need to notice it is back), and
whether both mounts are alive. The exit status is 1 when any of these fails, so it
serves as a check; ``--work DIR`` keeps the logs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench import rss_kib  # noqa: E402
from soak_report import (  # noqa: E402
    Sample,
    mib,
    report_errors,
    report_ingests,
    report_memory,
    report_mounts,
)

from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES  # noqa: E402
from tests.helpers.mount import Mount, fuse_available  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402
from tests.helpers.soak import (  # noqa: E402
    FOLLOW_TIMEOUT,
    Ingester,
    Journal,
    Reader,
    Window,
    job_file,
)
from tests.helpers.store import STORE_CACHE, built_store  # noqa: E402
from tests.helpers.zygote import Zygote  # noqa: E402

ONTOLOGIES = ["roses", "vegetables"]
CONCEPTS_EVERY = 5  # memory samples (seconds) between two counts of the concepts
DEFAULT_STEP = 0.1  # how far the administrator raises the default threshold
# (fraction of the run, event): the administrator's day
SCHEDULE = [(0.10, "raise"), (0.20, "restore"), (0.30, "restart"), (0.45, "raise"),
            (0.52, "restore"), (0.60, "kill"), (0.80, "raise"), (0.88, "restore")]


class Memory(threading.Thread):
    """Samples the server's resident memory every second: (t, server process, KiB); the
    processes are numbered from 1 in the order they were first seen. Every
    ``CONCEPTS_EVERY`` samples it also asks ``/health`` how many concepts the server
    holds: the ingests make the corpus grow, and what it holds takes memory."""

    def __init__(self, server: KGServer, journal: Journal) -> None:
        super().__init__(name="memory", daemon=True)
        self.server = server
        self.journal = journal
        self.samples: list[Sample] = []
        self.pids: list[int] = []
        self.starts: list[float] = []  # when each process was first seen
        self.concepts: list[tuple[float, int]] = []  # (t, concepts the server holds)
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            process = self.server.process
            kib = rss_kib(process.pid) if process is not None else None
            if process is None or not kib:
                continue
            if process.pid not in self.pids:
                self.pids.append(process.pid)
                self.starts.append(self.journal.now())
            if len(self.samples) % CONCEPTS_EVERY == 0:
                self.count_concepts()  # first: the sample then has a count before it
            self.samples.append((self.journal.now(), self.pids.index(process.pid) + 1, kib))

    def count_concepts(self) -> None:
        try:
            health = httpx.get(f"{self.server.api_url}/health", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return  # restarting: the next count will do
        self.concepts.append((self.journal.now(), int(health["concepts"])))


class Operator:
    """The administrator: default changes, a restart and a kill, at their times."""

    def __init__(self, server: KGServer, journal: Journal, ingester: Ingester) -> None:
        self.server = server
        self.journal = journal
        self.ingester = ingester  # the one whose long document the kill interrupts
        self.original: float | None = None
        self.changes: list[float] = []
        self.events: list[str] = []

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.api_url, timeout=30,
                            headers=self.server.headers("admin"))

    def set_default(self, value: float) -> None:
        def put() -> None:
            with self.admin() as http:
                response = http.put("/admin/config/search-threshold",
                                    json={"threshold": value})
            if response.status_code != 200:
                raise OSError(5, f"PUT default: HTTP {response.status_code} {response.text}")

        if self.journal.run("admin", "PUT default", f"{value:.2f}", put) is None:
            self.changes.append(value)

    def do(self, event: str) -> None:
        if self.original is None:
            with self.admin() as http:
                self.original = http.get("/admin/config/search-threshold").json()["threshold"]
        if event == "raise":
            self.set_default(min(1.0, round((self.original or 0.0) + DEFAULT_STEP, 2)))
        elif event == "restore" and self.original is not None:
            self.set_default(self.original)
        elif event == "restart":
            window = self.journal.open_window("restart")
            status = self.server.stop()
            self.started_again(window, f"graceful restart (SIGTERM: exit status {status})")
        elif event == "kill":
            middle = self.long_job_running(timeout=60.0)
            window = self.journal.open_window("kill -9")
            assert self.server.process is not None
            self.server.process.kill()
            self.server.process.wait()
            self.server.process = None
            self.started_again(window, f"kill -9 {middle}")

    def started_again(self, window: Window, what: str) -> None:
        self.server.start()
        window.ended = time.monotonic()
        self.events.append(f"t={window.started - self.journal.origin:6.1f}s {what}; healthy "
                           f"again after {window.ended - window.started:.1f} s")

    def long_job_running(self, timeout: float) -> str:
        """Copy a long document and wait until the server is embedding it."""
        self.ingester.want_big.set()
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.server.api_url, timeout=5,
                          headers=self.server.headers("user")) as http:
            while time.monotonic() < deadline:
                time.sleep(0.02)
                upload = self.ingester.current
                if upload is None or not upload.name.startswith("big"):
                    continue
                try:  # the job file, read here too: the ingester reads it less often
                    shown = job_file(self.ingester.box / f"{upload.name}.ingesting") or {}
                except OSError:
                    continue
                if shown.get("job", "-") == "-":
                    continue
                job = http.get(f"/jobs/{shown['job']}").json()
                stage = (job.get("progress") or {}).get("stage")
                if job.get("status") == "running" and stage == "embedding":
                    return f"in the middle of an ingest (job {job['job_id']}, {stage})"
        return "(no long ingest was seen running: killed anyway)"


class Soak:
    def __init__(self, opts: argparse.Namespace) -> None:
        self.opts = opts
        self.seconds = opts.seconds if opts.seconds is not None else opts.minutes * 60
        self.work = Path(opts.work) if opts.work else Path(tempfile.mkdtemp(prefix="soak-"))
        self.server = KGServer(self.work / "server", modules=SMALL_TEST_MODULES,
                               seed=built_store(STORE_CACHE))
        if opts.port:
            self.server.port = opts.port
        self.mounts: list[Mount] = []

    def mount(self, name: str) -> Mount:
        env = {**os.environ, **self.server.env,
               "XDG_DATA_HOME": str(self.work / f"mount-data-{name}")}
        mount = Mount(self.work / f"mnt-{name}", env, self.work / f"mount-{name}.log")
        self.mounts.append(mount)
        return mount.start()

    def run(self) -> int:
        started = time.monotonic()
        Zygote.shared("mount")  # imports the mount's libraries while the server starts
        self.server.start()
        self.journal = Journal()  # the day starts once the server is up
        self.memory = Memory(self.server, self.journal)
        first, second = self.mount("a"), self.mount("b")
        for ontology in ONTOLOGIES:
            first.path("ontology", ontology).mkdir(exist_ok=True)
        ingesters = [Ingester(f"ingest-{o}", self.journal, 10 + i, m, o)
                     for i, (m, o) in enumerate(zip((first, second), ONTOLOGIES, strict=True))]
        readers = [Reader(f"reader-{n}", self.journal, 20 + i, m, ONTOLOGIES)
                   for i, (n, m) in enumerate((("a", first), ("b", second)))]
        operator = Operator(self.server, self.journal, ingesters[0])
        print(f"soak: server and two mounts up in {time.monotonic() - started:.1f} s; "
              f"running for {self.seconds:.0f} s", flush=True)
        self.memory.start()
        for actor in [*ingesters, *readers]:
            actor.start()
        self.timeline(operator, ingesters)
        self.memory.stopping.set()
        for ingester in ingesters:
            ingester.settling.set()  # each follows its last file to the end
        for reader in readers:
            reader.stopping.set()
        for actor in [*ingesters, *readers]:
            actor.join(FOLLOW_TIMEOUT + 10)
        print(f"soak: the users finished in {self.journal.now() - self.seconds:.1f} s more",
              flush=True)
        return self.report(operator, ingesters, readers)

    def timeline(self, operator: Operator, ingesters: list[Ingester]) -> None:
        events = [(self.journal.origin + f * self.seconds, e) for f, e in SCHEDULE]
        next_line = time.monotonic() + self.opts.report_every
        end = self.journal.origin + self.seconds
        while time.monotonic() < end:
            if events and time.monotonic() >= events[0][0]:
                operator.do(events.pop(0)[1])
                continue
            if time.monotonic() >= next_line:
                self.progress(ingesters)
                next_line += self.opts.report_every
            time.sleep(0.1)

    def progress(self, ingesters: list[Ingester]) -> None:
        up, down = self.journal.failures()
        rss = self.memory.samples[-1][2] if self.memory.samples else 0
        copied = sum(len(i.uploads) for i in ingesters)
        acked = sum(u.acknowledged is not None for i in ingesters for u in i.uploads)
        concepts = self.memory.concepts[-1][1] if self.memory.concepts else 0
        print(f"[{self.journal.now():5.0f}s] server rss {mib(rss)}, {concepts} concepts | ops "
              f"{len(self.journal.ops)}, errors while up {len(up)}, in outages {len(down)}"
              f" | ingests copied {copied}, acknowledged {acked}", flush=True)

    def report(self, operator: Operator, ingesters: list[Ingester],
               readers: list[Reader]) -> int:
        print(f"\nsoak: {self.seconds:.0f} s, server {self.server.api_url}, mounts "
              f"{', '.join(str(m.mountpoint) for m in self.mounts)}")
        for event in operator.events:
            print(f"  {event}")
        print(f"  default changes: {len(operator.changes)} (from {operator.original}: "
              f"{', '.join(f'{v:.2f}' for v in operator.changes)})")
        failed = report_memory(self.memory.samples, self.memory.starts, self.opts.warmup,
                               self.opts.report_every, self.memory.concepts)
        failed += report_ingests(self.server, ingesters, self.mounts)
        failed += report_errors(self.journal, readers)
        failed += report_mounts(self.mounts, [*ingesters, *readers])
        print(f"\nresult: {'FAIL: ' + '; '.join(failed) if failed else 'PASS'}")
        return 1 if failed else 0

    def close(self) -> None:
        for mount in self.mounts:  # the report unmounted the live ones
            if mount.returncode is None:
                mount.kill()  # a lazy unmount, also of a mount whose daemon died
        self.server.stop()
        if not self.opts.work and not self.opts.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, help="the run's length (overrides "
                        "--minutes)")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds of each server "
                        "process left out of the memory judgement (default 60)")
    parser.add_argument("--report-every", type=float, default=30.0)
    parser.add_argument("--port", type=int, help="the server's port (default: a free one)")
    parser.add_argument("--work", help="folder for the server's data, the mountpoints and "
                        "the logs (default: a temporary one, removed at the end)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    opts = parser.parse_args()
    if not fuse_available():
        print("soak: needs /dev/fuse and fusermount3", file=sys.stderr)
        return 2
    soak = Soak(opts)
    try:
        return soak.run()
    finally:
        soak.close()


if __name__ == "__main__":
    sys.exit(main())
