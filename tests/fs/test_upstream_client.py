"""The platform's own FUSE client (kg-fuse 0.14.0 from PyPI), mounted against our
embedded server: it reads documents with their tags, has an image refused with the
server's reason, and deletes a document when its configuration allows it.

That package has our distribution's name, so it lives in its own virtual environment;
point ``KG_FUSE_UPSTREAM`` at its ``kg-fuse`` executable (see docs/usage.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kg_fuse.fs.kernel import mounts
from tests.helpers.mount import fuse_available, wait_for

UPSTREAM = os.environ.get("KG_FUSE_UPSTREAM")
COMPRESSION = "Data Compression and Archiving"

pytestmark = [
    pytest.mark.mount,
    pytest.mark.skipif(not UPSTREAM, reason="KG_FUSE_UPSTREAM is not set (the path of the "
                                            "platform client's kg-fuse executable)"),
    pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse and fusermount3"),
]


@pytest.fixture
def upstream(kg_server_clone, tmp_path):
    """The upstream client mounted in the foreground, its log in a file."""
    server = kg_server_clone()
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # its own package
           **{f"XDG_{kind}_HOME": str(tmp_path / kind.lower())
                            for kind in ("CONFIG", "DATA", "STATE")},
           "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    config = Path(env["XDG_CONFIG_HOME"], "kg")
    config.mkdir(parents=True)
    (config / "fuse.json").write_text(json.dumps({"mounts": {str(mountpoint): {
        "write_protect": {"allow_document_delete": True},
        "tags": {"enabled": True}}}}))
    log_path = tmp_path / "upstream.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [UPSTREAM, "mount", str(mountpoint), "--foreground", "--api-url", server.api_url,
             "--client-id", server.user["client_id"],
             "--client-secret", server.user["client_secret"]],
            env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: os.path.ismount(mountpoint) or process.poll() is not None,
                 timeout=60, what="the upstream mount")
        assert process.poll() is None, log_path.read_text(errors="replace")
        yield server, mountpoint, log_path
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mountpoint)], check=False)
        process.terminate()  # it stays up after an unmount: asking it to go saves 15 s
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_platform_client_against_our_server(upstream) -> None:
    server, mountpoint, log_path = upstream
    documents = mountpoint / "ontology" / COMPRESSION / "documents"
    names = wait_for(lambda: sorted(n for n in os.listdir(documents)
                                          if not n.startswith(".")),
                     what="documents")

    # documents come with their tags (GET /documents/{id}/concepts)
    text = (documents / names[0]).read_text()
    assert text.startswith("---\n") and "\ntags:\n  - concept/" in text, text[:500]

    # an image copied into ingest/ is refused with the server's reason (POST /ingest/image)
    ingest = mountpoint / "ontology" / COMPRESSION / "ingest"
    (ingest / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 500)
    wait_for(lambda: "photo.png" in log_path.read_text(errors="replace")
             and "400 Bad Request" in log_path.read_text(errors="replace"),
             timeout=30, what="the refusal in the client's log")
    server_log = Path(server.log_path).read_text(errors="replace")
    assert "refused image 'photo.png'" in server_log and "no vision model" in server_log

    # rm deletes the document on the server (DELETE /documents/{id})
    victim = names[0]
    os.unlink(documents / victim)
    http = server.client("user")
    ontologies = {n["name"]: n["id"] for n in http.get("/catalog/children").json()["nodes"]}
    left = http.get("/catalog/children", params={"parent": ontologies[COMPRESSION],
                                                 "parent_kind": "ontology"}).json()["nodes"]
    assert victim not in {n["name"] for n in left} and len(left) == len(names) - 1
    assert victim not in os.listdir(documents)
    time.sleep(0.5)
    assert "Traceback" not in log_path.read_text(errors="replace")


def test_status_and_unmount_leave_the_platform_clients_mount_alone(upstream) -> None:
    """The platform's client also calls itself kg-fuse (type ``fuse``, source
    ``kg-fuse``): ``kg-fuse status`` and ``unmount`` refuse its mount and leave it, and
    its process, running."""
    _server, mountpoint, _log = upstream
    entry = mounts.mounted_at(mountpoint)
    assert entry is not None and entry.source == "kg-fuse", entry  # it claims our name
    for command in ("status", "unmount"):
        result = subprocess.run([sys.executable, "-m", "kg_fuse.cli", command,
                                 str(mountpoint)], capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode == 1, result
        assert f"{mountpoint} is not a kg-fuse mount" in result.stderr, result.stderr
        assert os.path.ismount(mountpoint)
    assert "ontology" in os.listdir(mountpoint)  # still served by its process


def test_the_platform_client_lists_a_query_whose_answer_says_why(upstream) -> None:
    """Our search results carry an extra ``why`` (issue 42); the platform's client reads
    the fields it knows and lists the query's results as before."""
    server, mountpoint, log_path = upstream
    with server.client() as http:
        answer = http.post("/query/search", json={"query": "compress data with gzip"})
    assert answer.json()["results"][0]["why"]["matched"]
    query = mountpoint / "compress data with gzip"
    query.mkdir()
    listed = wait_for(lambda: [n for n in os.listdir(query) if "gzip.compress" in n],
                      what="the platform client's listing of a query")
    assert (query / listed[0]).read_text()  # type: ignore[index]
    assert "Traceback" not in log_path.read_text(errors="replace")
