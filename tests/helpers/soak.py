"""The users of ``scripts/soak.py``: what they do through real mounts, and what they saw.

A :class:`Journal` keeps every operation a user made (its time, and the errno if it
failed) and the windows in which the server was being restarted or killed, so the end
can tell errors a user saw while the server was up from those of an outage. A
:class:`Reader` lists and reads saved queries in one mount; an :class:`Ingester` copies
generated Markdown files into one ontology's ``ingest/`` and follows each file's
``.ingesting`` job file until the server says it is done, copying it again when the job
was interrupted by a stop (the job file says so, as a user would read it).
"""

from __future__ import annotations

import errno
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from tests.helpers.mount import Mount

T = TypeVar("T")

# After the server answers again, the mount notices within one poll interval (5 s by
# default) and retries a waiting upload within 10 s: errors until then are the outage's.
GRACE_SECONDS = 10.0
INTERRUPTED = "the server stopped before the job finished"  # the server's job error
FOLLOW_TIMEOUT = 180.0  # one file's upload and job, outages included
QUERIES = [
    "compress data with gzip", "read rows from a csv file", "parse json text",
    "make a temporary directory", "match file names with wildcards",
    "wrap long lines of text", "base64 encoding", "extract a tar archive",
    "pruning roses in spring", "watering the vegetable beds", "compost and soil",
]
GARDEN_TEXT = ("rose tomato basil compost mulch trellis seedling hedge orchard pear apple "
          "bean pea squash pumpkin lettuce onion garlic leek carrot beet radish fern "
          "moss lavender thyme sage rosemary mint dahlia tulip daffodil iris lily "
          "hosta ivy clover meadow pond frog snail slug aphid ladybird bee wasp worm "
          "spade hoe rake shears hose barrow greenhouse cloche frame shed fence gate "
          "path border bed pot tray label twine cane stake net fleece frost drought "
          "rain sun shade wind clay loam sand peat leaf bud bloom seed root stem "
          "graft prune water feed weed sow plant harvest divide repot stake tie")
GARDEN = GARDEN_TEXT.split()  # the words of the generated notes


@dataclass
class Op:
    """One thing a user did and how it ended."""

    started: float
    ended: float
    actor: str
    what: str
    path: str
    errno: int | None = None
    message: str = ""

    def line(self, origin: float) -> str:
        name = errno.errorcode.get(self.errno or 0, str(self.errno))
        return (f"t={self.started - origin:6.1f}s {self.actor} {self.what} {self.path!r}: "
                f"{name} ({self.message})")


@dataclass
class Window:
    """The server being restarted or killed: from the first signal to healthy again."""

    label: str
    started: float
    ended: float | None = None


class Journal:
    """Every operation and every outage window, shared by all threads."""

    def __init__(self) -> None:
        self.origin = time.monotonic()
        self.ops: list[Op] = []
        self.windows: list[Window] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.origin

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append(f"t={self.now():6.1f}s {text}")

    def open_window(self, label: str) -> Window:
        window = Window(label, time.monotonic())
        with self._lock:
            self.windows.append(window)
        return window

    def in_window(self, op: Op) -> bool:
        for window in self.windows:
            end = (window.ended or float("inf")) + GRACE_SECONDS
            if op.started <= end and op.ended >= window.started:
                return True
        return False

    def run(self, actor: str, what: str, path: Path | str, fn: Callable[[], T]) -> T | OSError:
        """Do ``fn`` as a user would and record it; an OSError is returned, not raised."""
        started = time.monotonic()
        try:
            value: T | OSError = fn()
            code, message = None, ""
        except OSError as exc:
            value, code, message = exc, exc.errno, exc.strerror or str(exc)
        op = Op(started, time.monotonic(), actor, what, str(path), code, message)
        with self._lock:
            self.ops.append(op)
        return value

    def failures(self) -> tuple[list[Op], list[Op]]:
        """(failed operations while the server was up, those of an outage window)."""
        with self._lock:
            failed = [op for op in self.ops if op.errno is not None]
        outside = [op for op in failed if not self.in_window(op)]
        return outside, [op for op in failed if op not in outside]


class MountGone(Exception):
    """ENOTCONN: the mount's daemon is gone, and with it everything this user could do."""


class Actor(threading.Thread):
    """A user thread: runs :meth:`step` until told to stop, or its mount is gone."""

    pause = 0.5

    def __init__(self, name: str, journal: Journal, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.journal = journal
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.crash: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.step()
                self.stopping.wait(self.pause)
        except MountGone:
            self.journal.note(f"{self.name}: its mount is gone (ENOTCONN); it stopped")
        except BaseException as exc:  # noqa: BLE001 - the report says the actor died
            self.crash = exc

    def step(self) -> None:
        raise NotImplementedError

    def do(self, what: str, path: Path, fn: Callable[[], T]) -> T | OSError:
        """Do ``fn`` and record it (see :meth:`Journal.run`)."""
        done = self.journal.run(self.name, what, path, fn)
        if isinstance(done, OSError) and done.errno == errno.ENOTCONN:
            raise MountGone(str(path))
        return done


class Reader(Actor):
    """Makes saved queries in one mount, lists them, reads results and status files."""

    def __init__(self, name: str, journal: Journal, seed: int, mount: Mount,
                 ontologies: list[str]) -> None:
        super().__init__(name, journal, seed)
        self.mount = mount
        self.ontologies = ontologies
        self.vanished = 0  # results gone between ls and cat: the listing changed

    def step(self) -> None:
        query = self.mount.path(self.rng.choice(QUERIES))
        if self.do("stat", query, query.exists) is False:
            made = self.do("mkdir", query, query.mkdir)
            if isinstance(made, OSError) and made.errno != errno.EEXIST:
                return
        names = self.do("ls", query, lambda: os.listdir(query))
        if isinstance(names, OSError):
            return
        results = [n for n in names if n.endswith(".concept.md")]
        for name in self.rng.sample(results, min(2, len(results))):
            self.read(query / name)
        self.do("cat", query / ".meta" / "status", (query / ".meta" / "status").read_bytes)
        if self.rng.random() < 0.2:
            documents = self.mount.path("ontology", self.rng.choice(self.ontologies),
                                        "documents")
            self.do("ls", documents, lambda: os.listdir(documents))
        if self.rng.random() < 0.1:
            self.do("rmdir", query, query.rmdir)

    def read(self, path: Path) -> None:
        """``cat`` a result; one that left the listing since ``ls`` is not an error."""
        def cat() -> bytes:
            try:
                return path.read_bytes()
            except FileNotFoundError:
                if path.name in os.listdir(path.parent):
                    raise
                self.vanished += 1
                return b""

        self.do("cat", path, cat)


@dataclass
class Upload:
    """One file copied into ``ingest/`` and what became of it."""

    name: str
    content: bytes
    copies: int = 0
    job_ids: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    acknowledged: float | None = None  # when the server said completed (monotonic)
    interrupted: list[str] = field(default_factory=list)  # job ids a stop failed
    outcome: str = ""  # "", "completed", "duplicate", "failed: ...", "stuck"


def garden_note(rng: random.Random, title: str, sections: int) -> bytes:
    """A Markdown file of ``sections`` heading sections of gardening words."""
    def words(n: int) -> str:
        return " ".join(rng.choice(GARDEN) for _ in range(n))

    parts = [f"# {title}\n"]
    for i in range(sections):
        parts.append(f"## {words(3).capitalize()} {i}\n\n{words(14).capitalize()}. "
                     f"{words(10).capitalize()}.\n")
    return "\n".join(parts).encode()


def job_file(path: Path) -> dict[str, str] | None:
    """The ``key: value`` lines of a ``.ingesting`` file; None when there is none."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return None
    lines = (line.partition(": ") for line in text.splitlines())
    return {key: value for key, _, value in lines}


class Ingester(Actor):
    """Copies notes into ``ontology/NAME/ingest/`` of one mount, one at a time, and
    follows each until the server has it (see :class:`Upload`)."""

    pause = 1.0
    sections = 6  # a small file: the index grows slowly, as in a day of use
    big_sections = 150  # a file whose job runs long enough to be killed in the middle

    def __init__(self, name: str, journal: Journal, seed: int, mount: Mount,
                 ontology: str) -> None:
        super().__init__(name, journal, seed)
        self.mount = mount
        self.ontology = ontology
        self.uploads: list[Upload] = []
        self.current: Upload | None = None
        self.want_big = threading.Event()
        self.settling = threading.Event()  # finish the current file, copy no new one

    @property
    def box(self) -> Path:
        return self.mount.path("ontology", self.ontology, "ingest")

    @property
    def documents(self) -> Path:
        return self.mount.path("ontology", self.ontology, "documents")

    def step(self) -> None:
        if self.settling.is_set():
            self.stopping.set()
            return
        big = self.want_big.is_set()
        self.want_big.clear()
        index = len(self.uploads)
        name = f"{'big' if big else 'note'}-{self.ontology}-{index:04d}.md"
        title = f"{self.ontology} {'long ' if big else ''}garden note {index}"
        content = garden_note(self.rng, title, self.big_sections if big else self.sections)
        upload = Upload(name, content)
        self.uploads.append(upload)
        self.current = upload
        self.ingest(upload)
        self.current = None

    def copy(self, upload: Upload, deadline: float) -> bool:
        """``cp`` the file into ``ingest/``; after a failure, again a second later, as a
        user would (the server may be starting)."""
        target = self.box / upload.name
        while True:
            upload.copies += 1
            written = self.do("cp", target, lambda: target.write_bytes(upload.content))
            if not isinstance(written, OSError):
                return True
            if time.monotonic() > deadline:
                upload.outcome = f"failed: cp: {written}"
                return False
            time.sleep(1.0)

    def ingest(self, upload: Upload) -> None:
        """Copy, then read the job file until the server says completed, copying again
        after an interrupted job (as its error asks)."""
        deadline = time.monotonic() + FOLLOW_TIMEOUT
        if not self.copy(upload, deadline):
            return
        job_path = self.box / (upload.name + ".ingesting")
        while time.monotonic() < deadline:
            time.sleep(0.2)
            job = self.do("cat", job_path, lambda: job_file(job_path))
            if isinstance(job, OSError):
                continue
            if job is None:  # no job file: not uploaded yet, or completed and gone
                listing = self.do("ls", self.box, lambda: os.listdir(self.box))
                if not isinstance(listing, OSError) and upload.name not in listing \
                        and job_path.name not in listing:
                    self.acknowledge(upload, "completed")
                    return
                continue
            self.observe(upload, job)
            status = job.get("status", "")
            if status == "completed":  # it stays while it shows warnings
                self.acknowledge(upload, "completed")
                self.do("rm", job_path, job_path.unlink)
                return
            if status == "duplicate":  # an interrupted job had stored it after all
                upload.outcome = "duplicate"
                self.do("rm", job_path, job_path.unlink)
                return
            if status == "failed":
                self.do("rm", job_path, job_path.unlink)
                if INTERRUPTED not in job.get("error", ""):
                    upload.outcome = f"failed: {job.get('error', '')}"
                    return
                upload.interrupted.append(job.get("job", "-"))
                self.journal.note(f"{self.name}: job {job.get('job')} of {upload.name} "
                                  "was interrupted; copying it again")
                if not self.copy(upload, deadline):
                    return
        upload.outcome = "stuck"

    def observe(self, upload: Upload, job: dict[str, str]) -> None:
        job_id, status = job.get("job", "-"), job.get("status", "")
        if job_id != "-" and job_id not in upload.job_ids:
            upload.job_ids.append(job_id)
        if not upload.statuses or upload.statuses[-1] != status:
            upload.statuses.append(status)

    def acknowledge(self, upload: Upload, outcome: str) -> None:
        upload.acknowledged = time.monotonic()
        upload.outcome = outcome
