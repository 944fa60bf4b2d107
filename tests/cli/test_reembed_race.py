"""A re-embed against a running server that ingests meanwhile: nothing is lost, and the
printed restart works pasted.

Before: an ingest while ``kg-fuse index --model`` ran left it exiting 0 with a restart
command whose server start then failed ("the store changed while it was re-embedded"),
leaving no server at all. Now ``index`` makes its copy again from the store as it is
(and says so), and a server restarted for the model after a later ingest re-embeds the
store before serving."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.cli.test_cli_errors import run
from tests.cli.test_interrupted_commands import MODULES, OTHER, launch, partial_of
from tests.cli.test_printed_commands_run import paste, printed
from tests.helpers.mount import wait_for
from tests.helpers.server import free_port


def _user_client(folder: Path, api_url: str) -> httpx.Client:
    held = json.loads((folder / "server/server-credentials.json").read_text())["user"]
    with httpx.Client(base_url=api_url, timeout=60) as anonymous:
        token = anonymous.post("/auth/oauth/token", data={
            "grant_type": "client_credentials", "client_id": held["client_id"],
            "client_secret": held["client_secret"]}).json()["access_token"]
    return httpx.Client(base_url=api_url, timeout=60,
                        headers={"Authorization": f"Bearer {token}"})


def _ingest(http: httpx.Client, name: str, text: str) -> None:
    queued = http.post("/ingest", data={"ontology": "race"},
                       files={"file": (f"{name}.md", text.encode(), "text/markdown")})
    assert queued.status_code == 200, queued.text
    job = queued.json()["job_id"]
    deadline = time.monotonic() + 120
    while (status := http.get(f"/jobs/{job}").json()["status"]) not in ("completed",
                                                                        "failed"):
        assert time.monotonic() < deadline, "the ingest did not finish"
        time.sleep(0.1)
    assert status == "completed"


def _documents(http: httpx.Client) -> set[str]:
    return set(http.get("/ontology/race").json()["files"])


@pytest.mark.timeout(900)
def test_an_ingest_during_a_reembed_is_kept_and_the_restart_serves_it(
        home_with_store: tuple[dict[str, str], Path, Path]) -> None:
    env, home, folder = home_with_store
    port = free_port()
    started = run(["server", "start", "--data-dir", str(folder), "--port", str(port),
                   *MODULES], env, home)
    assert started.returncode == 0, started.stderr
    api_url = f"http://127.0.0.1:{port}"
    try:
        with _user_client(folder, api_url) as http:
            index = launch(["index", "--data-dir", str(folder), "--model", OTHER], env,
                           home)
            wait_for(lambda: partial_of(folder).exists() or index.poll() is not None,
                     timeout=120, what="the re-embed to begin")
            _ingest(http, "during", "# Lanterns\n\nA paper lantern glows over the pond.\n")
            out, err = index.communicate(timeout=600)
            assert index.returncode == 0, err
            assert "the store changed while it was re-embedded" in err, err
            restart = printed(out, "restart it to serve the new one:")
            # and one more after index finished, before the restart is pasted
            _ingest(http, "after", "# Kites\n\nA box kite climbs on a steady wind.\n")
            before = _documents(http)
        assert {"during.md", "after.md"} <= before, before

        done = paste(restart, env, home)
        assert done.returncode == 0, done.stderr
        health = httpx.get(f"{api_url}/health", timeout=10).json()
        assert health["embedding_model"] == OTHER
        with _user_client(folder, api_url) as http:
            assert _documents(http) == before
            hits = http.post("/query/search", json={"query": "box kite wind",
                                                     "limit": 5}).json()["results"]
            assert hits, "the document ingested before the restart is not searchable"
        assert "re-embedding it now, before serving" in \
            (folder / "server/server.log").read_text()
    finally:
        run(["server", "stop", "--data-dir", str(folder)], env, home)
