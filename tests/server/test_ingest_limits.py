"""Bounded ingest: the job queue refuses (429) past its limits per client and in all, a
document may have only so many sections, and a stop ends a running job within seconds."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from kg_fuse.limits import (
    MAX_INGEST_BYTES,
    MAX_QUEUED_JOBS,
    MAX_QUEUED_JOBS_PER_CLIENT,
    MAX_SECTIONS_PER_DOCUMENT,
)
from tests.helpers.server import KGServer

STOP_BOUND = 10.0  # seconds, the bound for `kg-fuse server stop` during an ingest


def sections(count: int, topic: str = "lantern") -> str:
    """A Markdown document of ``count`` heading sections, each a short paragraph."""
    return "".join(f"## {topic.title()} note {n}\n\nHow the {topic} number {n} is kept, "
                   f"cleaned and lit in the evening.\n\n" for n in range(count))


@pytest.fixture
def server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    clone = kg_server_clone()  # its own store and queue; stopped mid-job here
    yield clone
    clone.stop()


def upload(http: httpx.Client, name: str, body: bytes, ontology: str = "Lamps"
           ) -> httpx.Response:
    return http.post("/ingest", files={"file": (name, body, "text/markdown")},
                     data={"ontology": ontology, "force": "true"})


def wait_for_job(http: httpx.Client, job_id: str, done: Callable[[dict], bool],
                 timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = http.get(f"/jobs/{job_id}").json()
        if done(job):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def start_a_long_job(http: httpx.Client) -> str:
    """A document at the section cap: its job runs for many seconds."""
    queued = upload(http, "lanterns.md", sections(MAX_SECTIONS_PER_DOCUMENT).encode())
    assert queued.status_code == 200, queued.text
    job_id = queued.json()["job_id"]
    wait_for_job(http, job_id, lambda job: job["status"] == "running")
    return job_id


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def refused(response: httpx.Response, reason: str) -> None:
    assert response.status_code == 429, response.text
    assert response.json()["detail"] == (f"The ingest queue is full: {reason}; retry once "
                                         "earlier jobs have finished")
    assert response.headers["retry-after"].isdigit()


def test_the_queue_refuses_jobs_and_bytes_past_its_limits(server: KGServer) -> None:
    big = b"# Big\n\n" + b"lamp oil " * ((MAX_INGEST_BYTES - 8) // 9)
    with server.client("user") as user, server.client("admin") as admin:
        long_job = start_a_long_job(user)  # the worker is busy: what follows waits
        long_size = len(sections(MAX_SECTIONS_PER_DOCUMENT).encode())
        assert upload(user, "big-1.md", big).status_code == 200
        refused(upload(user, "big-2.md", big + b"2"),
                f"your jobs waiting or running hold {mib(long_size + len(big))} and this "
                "file 32.0 MiB (at most 64.0 MiB per client)")
        assert upload(admin, "big-3.md", big + b"3").status_code == 200
        refused(upload(admin, "big-4.md", big + b"4"),
                f"the jobs waiting or running hold {mib(long_size + 2 * len(big) + 1)} and "
                "this file 32.0 MiB (at most 96.0 MiB in all)")
        for n in range(MAX_QUEUED_JOBS_PER_CLIENT - 2):
            assert upload(user, f"wick-{n}.md", sections(1, f"wick{n}").encode()
                          ).status_code == 200
        refused(upload(user, "one-more.md", b"# One more\n\ntext\n"),
                f"you have {MAX_QUEUED_JOBS_PER_CLIENT} jobs waiting or running (at most "
                f"{MAX_QUEUED_JOBS_PER_CLIENT} per client)")
        for n in range(MAX_QUEUED_JOBS - MAX_QUEUED_JOBS_PER_CLIENT - 1):
            assert upload(admin, f"flame-{n}.md", sections(1, f"flame{n}").encode()
                          ).status_code == 200
        assert user.get(f"/jobs/{long_job}").json()["status"] == "running"
    # a third client, with nothing queued of its own: the clients replaced beside the
    # running server (their jobs run on)
    subprocess.run([sys.executable, "-m", "kg_fuse.cli", "server", "credentials", "--rotate"],
                   env={**os.environ, **server.env}, capture_output=True, text=True,
                   timeout=120, check=True)
    token = server.fetch_token("user")  # the new user client's (the cached one is revoked)
    with httpx.Client(base_url=server.api_url, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as third:
        refused(upload(third, "late.md", b"# Late\n\ntext\n"),
                f"the server has {MAX_QUEUED_JOBS} jobs waiting or running (at most "
                f"{MAX_QUEUED_JOBS})")


def test_a_document_of_too_many_sections_fails_saying_why(server: KGServer) -> None:
    over = MAX_SECTIONS_PER_DOCUMENT + 1
    with server.client("user") as http:
        queued = upload(http, "almanac.md", sections(over, "almanac").encode(), "Almanacs")
        job = wait_for_job(http, queued.json()["job_id"],
                           lambda job: job["status"] in ("completed", "failed"))
        assert job["status"] == "failed"
        assert job["error"] == (f"the document has {over} sections, more than the "
                                f"{MAX_SECTIONS_PER_DOCUMENT} one document may have: "
                                "split it")
        assert http.get("/ontology/Almanacs").status_code == 404  # nothing was stored


def test_stop_ends_a_large_ingest_within_seconds(server: KGServer) -> None:
    with server.client("user") as http:
        long_job = start_a_long_job(http)
        waiting = upload(http, "later.md", sections(3, "later").encode()).json()["job_id"]
        wait_for_job(http, long_job,
                     lambda job: (job["progress"] or {}).get("stage") == "embedding")
        time.sleep(1)  # well into the embedding
    started = time.monotonic()
    stopped = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "server", "stop"],
                             env={**os.environ, **server.env}, capture_output=True,
                             text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert stopped.returncode == 0 and "stopped the server" in stopped.stdout, stopped
    assert elapsed < STOP_BOUND, f"kg-fuse server stop took {elapsed:.1f} s"
    assert "ignored SIGTERM" not in stopped.stderr
    print(f"kg-fuse server stop during a {MAX_SECTIONS_PER_DOCUMENT}-section ingest: "
          f"{elapsed:.1f} s")
    server.stop()  # it has exited: only forget the process
    server.start()
    with server.client("user") as http:
        for job_id in (long_job, waiting):  # cleanly failed, saying what to do
            job = http.get(f"/jobs/{job_id}").json()
            assert job["status"] == "failed", job
            assert job["error"] == ("the server stopped before the job finished; upload "
                                    "the file again")
        # the interrupted document was taken out whole: nothing half-ingested is listed
        lamps = http.get("/ontology/Lamps")
        assert lamps.status_code == 404 or lamps.json()["statistics"]["file_count"] == 0
        found = http.post("/query/search", json={"query": "lantern note 7 kept cleaned",
                                                 "min_similarity": 0.0}).json()
        assert not any(r["label"].startswith("Lantern note") for r in found["results"])


def test_an_ingest_killed_in_its_middle_is_failed_and_uploading_again_stores_it_once(
        server: KGServer) -> None:
    body = sections(MAX_SECTIONS_PER_DOCUMENT).encode()
    with server.client("user") as http:
        long_job = start_a_long_job(http)
        wait_for_job(http, long_job,
                     lambda job: (job["progress"] or {}).get("stage") == "embedding")
        time.sleep(1)  # well into the embedding
    assert server.process is not None
    server.process.kill()  # kill -9: nothing runs on the way out
    server.stop()  # only forgets the dead process
    server.start()
    with server.client("user") as http:
        job = http.get(f"/jobs/{long_job}").json()
        assert job["status"] == "failed", job
        assert job["error"] == ("the server stopped before the job finished; upload the "
                                "file again")
        lamps = http.get("/ontology/Lamps")  # what the job said: nothing was stored
        assert lamps.status_code == 404 or lamps.json()["statistics"]["file_count"] == 0
        again = http.post("/ingest", files={"file": ("lanterns.md", body, "text/markdown")},
                          data={"ontology": "Lamps"})  # as asked, and as a mount does
        assert again.status_code == 200 and not again.json().get("duplicate"), again.text
        done = wait_for_job(http, again.json()["job_id"],
                            lambda job: job["status"] in ("completed", "failed"))
        assert done["status"] == "completed", done
        assert http.get("/ontology/Lamps").json()["statistics"]["file_count"] == 1


def test_an_ingest_killed_after_listing_its_document_is_completed_at_restart(
        server: KGServer) -> None:
    with server.client("user") as http:
        queued = upload(http, "wicks.md", sections(3, "wick").encode()).json()["job_id"]
        done = wait_for_job(http, queued, lambda job: job["status"] == "completed")
    server.stop()
    # what a kill -9 between listing the document and recording the job leaves
    with sqlite3.connect(server.db_path) as db:
        db.execute("UPDATE jobs SET status = 'running', result = NULL, completed_at = NULL "
                   "WHERE id = ?", (queued,))
    server.start()
    with server.client("user") as http:
        job = http.get(f"/jobs/{queued}").json()
        assert job["status"] == "completed", job  # not "upload again": it is there
        assert job["result"]["document_id"] == done["result"]["document_id"]
        assert http.get("/ontology/Lamps").json()["statistics"]["file_count"] == 1
