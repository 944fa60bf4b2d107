"""The end of ``scripts/soak.py``: what the day left, printed, and what failed.

Each ``report_*`` prints its part and returns the failures it found (empty when all is
well): memory flat once warm, no acknowledged ingest lost, no error a user saw while the
server was up, every mount alive.
"""

from __future__ import annotations

import collections
import errno
import os
import statistics
import time
from pathlib import Path

from tests.helpers.mount import Mount
from tests.helpers.server import KGServer
from tests.helpers.soak import GRACE_SECONDS, Actor, Ingester, Journal, Reader

FLAT_WITHIN = 0.10  # the largest resident memory over the smallest, once warm
SHOWN_ERRORS = 20  # errors listed one by one; the rest are counted by kind
CATALOG_WAIT = 30.0  # a mount shows a new document within a poll interval of its ingest

Sample = tuple[float, int, int]  # (seconds into the run, server process 1.., RSS in KiB)


def mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


def concepts_at(counts: list[tuple[float, int]], t: float) -> int | None:
    """The last count of concepts at or before ``t`` (None before the first)."""
    held = [n for at, n in counts if at <= t]
    return held[-1] if held else None


def per_thousand_concepts(warm: list[tuple[int, int]]) -> str:
    """How resident memory followed the corpus: the least-squares slope of RSS over
    concepts held, in MiB per 1,000 concepts; ``warm``: (concepts, KiB) samples."""
    grown = max(n for n, _ in warm) - min(n for n, _ in warm)
    if grown < 100:
        return f"the corpus grew by {grown} concepts, too few for a slope"
    slope = statistics.linear_regression([n for n, _ in warm], [k for _, k in warm]).slope
    return (f"the corpus grew by {grown} concepts; RSS over concepts: "
            f"{slope * 1000 / 1024:+.1f} MiB per 1,000 concepts")


def window_medians(timed: list[tuple[float, int]], every: float) -> list[float]:
    """The median RSS of each ``every``-second window from the first sample on: memory
    that grows moves them, a job's passing peak (one second of a big batch) does not."""
    windows: dict[int, list[int]] = collections.defaultdict(list)
    for t, kib in timed:
        windows[int((t - timed[0][0]) // every)].append(kib)
    full = [kibs for _, kibs in sorted(windows.items()) if len(kibs) >= every / 3]
    return [statistics.median(kibs) for kibs in full or list(windows.values())]


def report_memory(samples: list[Sample], starts: list[float], warmup: float,
                  every: float, counts: list[tuple[float, int]]) -> list[str]:
    """Samples (one a second) printed every ``every`` seconds; per server process, whether
    it stays flat once ``warmup`` seconds past its start (``starts``: when each became
    healthy), judged on the medians of ``every``-second windows, and how it followed the
    corpus (``counts``: (t, concepts held), from ``/health``)."""
    print("\nserver resident memory (RSS) over time:")
    step = max(1, round(every))
    for i, (t, start, kib) in enumerate(samples):
        if i % step == 0 or i == len(samples) - 1:
            print(f"  t={t:6.1f}s  server process {start}  {mib(kib)}  "
                  f"{concepts_at(counts, t) or '?'} concepts")
    failed = []
    warm = [s for s in samples if s[0] >= starts[s[1] - 1] + warmup]
    for start in range(1, len(starts) + 1):
        timed = [(t, kib) for t, s, kib in warm if s == start]
        mine = [kib for _, kib in timed]
        head = f"  server process {start}, after its first {warmup:.0f} s:"
        if len(mine) < 5:
            print(f"{head} {len(mine)} samples, too few to judge")
            continue
        peak = max(timed, key=lambda sample: sample[1])
        print(f"{head} {len(mine)} samples, min {mib(min(mine))}, median "
              f"{mib(statistics.median(mine))}, max {mib(max(mine))} (at t={peak[0]:.0f}s): "
              f"every sample within {max(mine) / min(mine) - 1:.1%}")
        medians = window_medians(timed, every)
        spread = max(medians) / min(medians) - 1
        flat = spread <= FLAT_WITHIN
        print(f"    medians of its {len(medians)} windows of {every:.0f} s: "
              f"{', '.join(f'{m / 1024:.0f}' for m in medians)} MiB: spread {spread:.1%} "
              f"-> flat within {FLAT_WITHIN:.0%}: {'yes' if flat else 'NO'}")
        followed = [(n, kib) for t, s, kib in warm
                    if s == start and (n := concepts_at(counts, t)) is not None]
        if followed:
            print(f"    {per_thousand_concepts(followed)}")
        if not flat:
            failed.append(f"memory of server process {start} not flat ({spread:.1%})")
    if warm:
        kibs = [kib for _, _, kib in warm]
        print(f"  every process once warm: min {mib(min(kibs))}, max {mib(max(kibs))} "
              f"({max(kibs) / min(kibs) - 1:.1%} apart)")
    return failed


def server_documents(server: KGServer, ontology: str) -> set[str]:
    """The names of the documents the server's catalog holds in ``ontology``."""
    with server.client("user") as http:
        roots = http.get("/catalog/children", params={"limit": 1000}).json()["nodes"]
        ids = [node["id"] for node in roots if node["name"] == ontology]
        if not ids:
            return set()
        page = http.get("/catalog/children", params={
            "parent": ids[0], "parent_kind": "ontology", "limit": 1000}).json()
    return {node["name"] for node in page["nodes"]}


def shown(documents: Path, wanted: set[str]) -> set[str] | None:
    """What ``documents/`` lists once ``wanted`` are all there (or after a wait); None
    when the mount is gone."""
    deadline = time.monotonic() + CATALOG_WAIT
    while True:
        try:
            listed = set(os.listdir(documents))
        except OSError as exc:
            if exc.errno == errno.ENOTCONN:
                return None
            listed = set()
        if wanted <= listed or time.monotonic() > deadline:
            return listed
        time.sleep(0.5)


def report_ingests(server: KGServer, ingesters: list[Ingester],
                   mounts: list[Mount]) -> list[str]:
    """Acknowledged = the server said the job completed (the ``.ingesting`` file went
    away). Each must be a document on the server at the end, and shown in ``documents/``
    by every mount still alive."""
    print("\ningests:")
    lost_total = missing_total = unshown_total = duplicate_total = 0
    for ingester in ingesters:
        uploads, ontology = ingester.uploads, ingester.ontology
        acked = {u.name for u in uploads if u.acknowledged is not None}
        held = server_documents(server, ontology)
        lost = sorted(acked - held)
        missing = [u for u in uploads if u.name not in held and u.name not in acked]
        interrupted = [u for u in uploads if u.interrupted]
        # every note is new: a duplicate is one whose job said "upload the file again"
        # (the server stopped) while the server kept it after all
        duplicates = [u for u in uploads if u.outcome == "duplicate"]
        print(f"  {ontology}: {len(uploads)} files copied, {len(acked)} acknowledged (the "
              f"server said completed); the server holds {len(held & acked)} of those; "
              f"{len(interrupted)} interrupted by a stop and copied again")
        for mount in mounts:
            listed = shown(mount.path("ontology", ontology, "documents"),
                           held & {u.name for u in uploads})
            if listed is None:
                continue
            unshown = sorted((held & {u.name for u in uploads}) - listed)
            unshown_total += len(unshown)
            print(f"    {mount.mountpoint.name}/ontology/{ontology}/documents/ shows "
                  f"{len(held & listed)} of them" + (f"; not {unshown}" if unshown else ""))
        for upload in interrupted:
            print(f"    {upload.name}: jobs {', '.join(upload.job_ids)}; interrupted "
                  f"{', '.join(upload.interrupted)}; then {upload.outcome}")
        for name in lost:
            print(f"    LOST: {name}")
        for upload in duplicates:
            print(f"    DUPLICATE: {upload.name} (jobs {', '.join(upload.job_ids)}): a job "
                  "said to upload it again, yet the server held it")
        for upload in missing:
            print(f"    not ingested: {upload.name} ({upload.outcome or 'pending'}; job "
                  f"statuses seen: {' > '.join(upload.statuses) or 'none'})")
        lost_total += len(lost)
        missing_total += len(missing)
        duplicate_total += len(duplicates)
    print(f"  acknowledged ingests lost: {lost_total}")
    print(f"  files copied but not ingested at the end: {missing_total}")
    print(f"  documents a live mount does not show: {unshown_total}")
    print(f"  uploads again, as a job asked, that were duplicates: {duplicate_total}")
    return ([f"{lost_total} acknowledged ingests lost"] * bool(lost_total)
            + [f"{duplicate_total} duplicates after 'upload again'"] * bool(duplicate_total)
            + [f"{missing_total} files not ingested"] * bool(missing_total)
            + [f"{unshown_total} documents not shown"] * bool(unshown_total))


def report_errors(journal: Journal, readers: list[Reader]) -> list[str]:
    up, down = journal.failures()
    print(f"\noperations: {len(journal.ops)}; results gone between ls and cat (the listing "
          f"changed): {sum(r.vanished for r in readers)}")
    print(f"errors a user saw outside the restart/kill windows (+{GRACE_SECONDS:.0f} s): "
          f"{len(up)}")
    for label, errors in (("", up), ("inside them (expected): ", down)):
        if label:
            print(f"errors {label}{len(errors)}")
        for op in errors[:SHOWN_ERRORS]:
            print(f"  {op.line(journal.origin)}")
        kinds = collections.Counter(
            f"{op.actor} {op.what} {errno.errorcode.get(op.errno or 0, op.errno)}"
            for op in errors[SHOWN_ERRORS:])
        for kind, n in kinds.most_common():
            print(f"  and {n} x {kind}")
    for note in journal.notes:
        print(f"  note: {note}")
    return [f"{len(up)} errors while the server was up"] if up else []


def report_mounts(mounts: list[Mount], actors: list[Actor]) -> list[str]:
    """Each mount alive (its daemon runs and its root lists), then unmounted: it must
    exit 0, with no traceback in its log."""
    failed = [f"soak user {a.name} crashed: {a.crash!r}" for a in actors if a.crash]
    for line in failed:
        print(line)
    alive = 0
    for mount in mounts:
        ok = mount.process is not None and mount.process.poll() is None \
            and os.path.ismount(mount.mountpoint)
        try:
            os.listdir(mount.mountpoint)
        except OSError:
            ok = False
        alive += ok
        try:
            status: int | str | None = mount.unmount() if ok else None
        except Exception as exc:  # noqa: BLE001 - fusermount3 failed, or the daemon hung
            status = repr(exc)
        traces = (mount.log_text() + mount.stderr_text()).count("Traceback")
        print(f"mount {mount.mountpoint}: {'alive' if ok else 'DEAD'}; "
              + (f"unmounted, exit status {status}; " if ok else "")
              + f"tracebacks in its log: {traces}")
        if status:
            failed.append(f"{mount.mountpoint} exited with {status}")
        if traces:
            failed.append(f"{mount.mountpoint} logged {traces} tracebacks")
    print(f"mounts alive at the end: {alive} of {len(mounts)}")
    return failed + ["a mount died"] * (alive < len(mounts))
