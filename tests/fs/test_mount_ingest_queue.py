"""Mounted: a file copied into ingest/ while the server's ingest queue is full stays, its
``.ingesting`` file says why it waits, and it is uploaded once there is room."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import httpx
import pytest

from kg_fuse.limits import MAX_QUEUED_JOBS_PER_CLIENT
from tests.helpers.mount import wait_for
from tests.helpers.server import KGServer

pytestmark = pytest.mark.mount

FAST = ["--ingest-delay", "0.5", "--poll-interval", "1"]


@pytest.fixture
def server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    clone = kg_server_clone()  # its own queue, filled here
    yield clone
    clone.stop()


def sections(count: int, topic: str) -> bytes:
    return "".join(f"## {topic.title()} note {n}\n\nHow the {topic} number {n} is kept "
                   f"and lit.\n\n" for n in range(count)).encode()



def read(path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


@pytest.mark.timeout(300)
def test_a_full_queue_is_shown_in_the_job_file_and_the_upload_waits(
        server: KGServer, mount_factory, tmp_path) -> None:
    mount = mount_factory(server=server, extra_args=FAST,
                          allowed_log=[r"WARNING kg_fuse.fs.queries.ingest"])
    mount.path("ontology", "Lamps").mkdir()
    ingest = mount.path("ontology", "Lamps", "ingest")
    with server.client("user") as http:  # the mount's own client fills its share
        for n in range(MAX_QUEUED_JOBS_PER_CLIENT):
            body = sections(400 if n == 0 else 1, f"wick{n}")
            queued = http.post("/ingest", files={"file": (f"wick{n}.md", body)},
                               data={"ontology": "Lamps"})
            assert queued.status_code == 200, queued.text
    source = tmp_path / "zebra.md"
    source.write_text("# Zebra lamps\n\nStriped shades for reading lamps.\n")
    shutil.copy(source, ingest)
    job_file = ingest / "zebra.md.ingesting"
    status = wait_for(lambda: "queue is full" in (text := read(job_file)) and text,
                      timeout=60, what="the reason in the job file")
    assert "status: waiting for room in the server's ingest queue" in status
    assert (f"The ingest queue is full: you have {MAX_QUEUED_JOBS_PER_CLIENT} jobs waiting "
            f"or running (at most {MAX_QUEUED_JOBS_PER_CLIENT} per client)") in status
    assert "zebra.md" in os.listdir(ingest)  # kept until the server takes it
    documents = mount.path("ontology", "Lamps", "documents")
    wait_for(lambda: "zebra.md" in os.listdir(documents), timeout=240,
             what="the upload once the queue had room")
    assert (documents / "zebra.md").read_text() == source.read_text()
    assert httpx.get(f"{server.api_url}/health").status_code == 200
