"""Changing things on a private clone of the session server: threshold, ontologies,
ingest jobs, epochs, restarts and token expiry."""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.helpers.server import KGServer

RELEVANT = "compress data with gzip"
THRESHOLD = "/admin/config/search-threshold"

NOTES = """# Sourdough starter

A sourdough starter is a fermented mixture of flour and water that leavens bread.

Feed it daily with equal weights of flour and water.

## Hydration

Hydration is the ratio of water to flour in a dough, expressed as a percentage.

```
# not a heading: inside a fence
```

## Proofing baskets

Bannetons support the dough's shape during the final rise.
"""


@pytest.fixture(scope="module")
def module_server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    server = kg_server_clone()
    yield server
    server.stop()


@pytest.fixture
def server(module_server: KGServer) -> KGServer:
    """The module's clone, running with its default arguments and environment.

    A test that restarts it with others (``--ingest``, a short token lifetime) leaves
    it so; it is restarted here only if a later test needs it (a start costs seconds)."""
    if module_server.extra_args or module_server.extra_env or module_server.process is None:
        module_server.restart(extra_args=[], env={})
    return module_server


@pytest.fixture
def admin(server: KGServer) -> Iterator[httpx.Client]:
    with server.client("admin") as client:
        yield client


def epoch(http: httpx.Client) -> int:
    return http.get("/database/epoch").json()["epoch"]


def wait_for_job(http: httpx.Client, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = http.get(f"/jobs/{job_id}").json()
        if job["status"] in ("completed", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def test_put_threshold_changes_the_next_omitted_search(admin: httpx.Client) -> None:
    calibrated = admin.get(THRESHOLD).json()
    before = calibrated["threshold"]
    assert calibrated["source"] == "calibrated" and calibrated["concept_count"] > 100
    assert calibrated["calibrated_at"] and calibrated["noise_floor"] < before
    assert calibrated["recalibrates_after_change"] == 0.2
    response = admin.put(THRESHOLD, json={"threshold": 0.71})
    assert response.json() == {"key": "search_default_similarity_threshold",
                               "threshold": 0.71}
    provenance = admin.get(THRESHOLD).json()
    assert provenance["source"] == "administrator" and provenance["set_by"]
    assert provenance["set_at"] and provenance["recalibrates_after_change"] is None
    body = admin.post("/query/search", json={"query": RELEVANT}).json()
    assert body["threshold_used"] == 0.71
    assert all(r["score"] >= 0.71 for r in body["results"])
    explicit = admin.post("/query/search", json={"query": RELEVANT, "min_similarity": 0.2})
    assert explicit.json()["threshold_used"] == 0.2
    admin.put(THRESHOLD, json={"threshold": before})
    assert admin.post("/query/search", json={"query": RELEVANT}).json()["threshold_used"] \
        == before


def test_presets_are_published_with_the_default_and_follow_it(admin: httpx.Client,
                                                              server: KGServer) -> None:
    """exact/comprehensive come from the calibration, beside the default, for any user."""
    config = admin.get(THRESHOLD).json()
    default, presets = config["threshold"], config["presets"]
    assert presets["comprehensive"] < default < presets["exact"] <= 0.99
    assert presets["comprehensive"] >= default - 0.10 and "median" in config["preset_rule"]
    with server.client("user") as user:
        body = user.post("/query/search", json={"query": RELEVANT}).json()
        assert body["threshold_used"] == default and body["threshold_presets"] == presets
        polled = user.get("/database/epoch").json()  # what every mount polls
        assert (polled["default_threshold"], polled["threshold_presets"]) == (default, presets)
    try:
        admin.put(THRESHOLD, json={"threshold": 0.9})
        raised = admin.get(THRESHOLD).json()["presets"]
        assert raised["exact"] == 0.95 and 0.8 <= raised["comprehensive"] <= 0.88
        with server.client("user") as user:
            assert user.post("/query/search", json={"query": RELEVANT}).json()[
                "threshold_presets"] == raised
            polled = user.get("/database/epoch").json()
            assert (polled["default_threshold"], polled["threshold_presets"]) == (0.9, raised)
    finally:
        admin.put(THRESHOLD, json={"threshold": default})
    assert admin.get(THRESHOLD).json()["presets"] == presets


def test_create_and_delete_ontology_bump_the_epoch(admin: httpx.Client) -> None:
    name = "Odd name? #1 50% / more"
    e0 = epoch(admin)
    created = admin.post("/ontology/", json={"name": name, "description": "test"})
    assert created.status_code == 201
    assert created.json()["ontology"] == name
    e1 = epoch(admin)
    assert e1 > e0
    assert admin.post("/ontology/", json={"name": name}).status_code == 409
    assert admin.get(f"/ontology/{quote(name, safe='')}").json()["statistics"][
        "file_count"] == 0
    roots = admin.get("/catalog/children", params={"q": "Odd name"}).json()["nodes"]
    assert [n["name"] for n in roots] == [name] and roots[0]["child_count"] == 0
    deleted = admin.delete(f"/ontology/{quote(name, safe='')}")
    assert deleted.status_code == 200
    assert deleted.json()["deleted"] is True and deleted.json()["ontology"] == name
    assert epoch(admin) > e1
    assert admin.delete(f"/ontology/{quote(name, safe='')}").status_code == 404


def test_ingest_runs_in_the_background_and_becomes_searchable(server: KGServer) -> None:
    with server.client("user") as http:
        e0 = epoch(http)
        files = {"file": ("bread.md", NOTES.encode(), "text/markdown")}
        response = http.post("/ingest", files=files, data={"ontology": "Baking"})
        assert response.status_code == 200, response.text
        queued = response.json()
        assert queued["job_id"].startswith("job_") and len(queued["job_id"]) == 16
        assert queued["content_hash"].startswith("sha256:")
        assert queued["status"].startswith("pending") and queued["position"] is None
        job = wait_for_job(http, queued["job_id"])
        assert job["status"] == "completed", job
        assert job["progress"] is not None and job["error"] is None
        assert job["ontology"] == "Baking" and job["filename"] == "bread.md"
        assert job["completed_at"] and job["created_at"] and job["job_type"]
        assert epoch(http) > e0

        body = http.post("/query/search", json={"query": "ratio of water to flour"}).json()
        assert body["results"][0]["label"] == "Hydration"
        assert body["results"][0]["documents"] == ["Baking"]
        scoped = http.post("/query/search", json={"query": "bread", "ontology": "Baking",
                                                  "min_similarity": 0.0}).json()
        assert {r["label"] for r in scoped["results"]} == {
            "Sourdough starter", "Hydration", "Proofing baskets"}
        hydration = next(r for r in scoped["results"] if r["label"] == "Hydration")
        details = http.get(f"/query/concept/{hydration['concept_id']}").json()
        assert ("PART_OF", "Sourdough starter") in {(r["rel_type"], r["to_label"])
                                                    for r in details["relationships"]}
        assert details["instances"][0]["quote"].startswith("Hydration is the ratio")
        doc = http.get(f"/documents/{queued['content_hash']}/content").json()
        assert doc["content"]["document"] == NOTES


def test_duplicate_ingest_is_detected_and_force_reingests(server: KGServer) -> None:
    with server.client("user") as http:
        files = {"file": ("bread.md", NOTES.encode(), "text/markdown")}
        dup = http.post("/ingest", files=files, data={"ontology": "Baking"}).json()
        assert dup["duplicate"] is True and "job_id" not in dup
        assert dup["existing_job_id"].startswith("job_") and dup["status"] == "completed"
        forced = http.post("/ingest", files=files,
                           data={"ontology": "Baking", "force": "true"}).json()
        assert wait_for_job(http, forced["job_id"])["status"] == "completed"
        info = http.get("/ontology/Baking").json()
        assert info["statistics"]["file_count"] == 1
        assert info["statistics"]["concept_count"] == 3


def test_the_same_file_into_another_ontology_is_ingested_there(server: KGServer) -> None:
    """Duplicates are per ontology, as on the platform; a forced re-ingest replaces the
    copy of its own ontology and leaves the other's alone."""
    with server.client("user") as http:
        files = {"file": ("bread.md", NOTES.encode(), "text/markdown")}
        queued = http.post("/ingest", files=files, data={"ontology": "Pastry"}).json()
        assert "duplicate" not in queued and queued["job_id"].startswith("job_")
        done = wait_for_job(http, queued["job_id"])
        assert done["status"] == "completed"
        dup = http.post("/ingest", files=files, data={"ontology": "Pastry"}).json()
        assert dup["duplicate"] is True and dup["existing_job_id"] == queued["job_id"]
        assert "'Pastry'" in dup["message"]
        forced = http.post("/ingest", files=files,
                           data={"ontology": "Pastry", "force": "true"}).json()
        assert wait_for_job(http, forced["job_id"])["status"] == "completed"
        for name in ("Baking", "Pastry"):
            stats = http.get(f"/ontology/{name}").json()["statistics"]
            assert (stats["file_count"], stats["concept_count"]) == (1, 3), name
            hits = http.post("/query/search", json={
                "query": "ratio of water to flour", "ontology": name}).json()["results"]
            assert hits and hits[0]["label"] == "Hydration", name
        pastry = done["result"]["document_id"]
        assert pastry != queued["content_hash"]  # Baking's copy keeps the content hash
        doc = http.get(f"/documents/{pastry}/content").json()
        assert doc["content"]["document"] == NOTES
    with server.client("admin") as admin:
        assert admin.delete("/ontology/Pastry").status_code == 200
    with server.client("user") as http:
        stats = http.get("/ontology/Baking").json()["statistics"]
        assert (stats["file_count"], stats["concept_count"]) == (1, 3)


def test_ingest_needs_file_and_ontology(server: KGServer) -> None:
    with server.client("user") as http:
        assert http.post("/ingest", data={"ontology": "X"}).status_code == 422
        files = {"file": ("a.md", b"# A\n\ntext\n", "text/markdown")}
        assert http.post("/ingest", files=files).status_code == 422
    assert httpx.post(f"{server.api_url}/ingest").status_code == 401


def test_unknown_job_is_404(server: KGServer) -> None:
    with server.client("user") as http:
        assert http.get("/jobs/job_000000000000").status_code == 404


def stored_vectors(db_path: Path) -> str:
    """A digest of every stored embedding, with the row it belongs to."""
    digest = hashlib.sha256()
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        for row in db.execute("SELECT concept_id, view, model, vector FROM concept_views "
                              "ORDER BY concept_id, view"):
            digest.update(repr(row).encode())
    return digest.hexdigest()


def test_restart_reuses_the_store_without_reembedding(server: KGServer,
                                                      tmp_path: Path) -> None:
    old_token = server.token("user")
    with server.client("user") as http:
        concepts = http.get("/health").json()["concepts"]
        e0 = epoch(http)
        who = http.get("/database/epoch").json()["server_id"]
    vectors = stored_vectors(server.db_path)
    mark = len(server.log_text())
    server.restart()
    log = server.log_text()[mark:]
    assert f"loaded {concepts} embeddings from the store" in log
    assert "index is up to date" in log
    assert "embedding concepts" not in log  # no progress bar
    assert not re.search(r"embedding \d+ views", log)
    assert "calibration" not in log  # the stored default is kept
    assert stored_vectors(server.db_path) == vectors  # not one vector was rewritten
    headers = {"Authorization": f"Bearer {old_token}"}
    same = httpx.get(f"{server.api_url}/database/epoch", headers=headers)
    assert same.status_code == 200 and same.json()["epoch"] == e0  # tokens persist
    assert same.json()["server_id"] == who  # the same server: mounts keep its queries
    assert server.credentials["api_url"] == server.api_url

    folder = tmp_path / "garden notes"
    folder.mkdir()
    (folder / "tomatoes.md").write_text("# Tomatoes\n\nTomatoes need full sun.\n")
    server.restart(extra_args=["--ingest", str(folder)])
    log = server.log_text()
    assert re.search(r"embedding \d+ views of 1 concepts", log)
    with server.client("user") as http:
        assert epoch(http) > e0
        names = {n["name"] for n in http.get("/catalog/children").json()["nodes"]}
        assert "garden notes" in names


def test_tokens_expire(module_server: KGServer) -> None:
    server = module_server.restart(extra_args=[], env={"KG_FUSE_SERVER_TOKEN_TTL": "2"})
    response = httpx.post(f"{server.api_url}/auth/oauth/token",
                          data={"grant_type": "client_credentials", **server.user})
    token = response.json()
    assert token["expires_in"] == 2
    headers = {"Authorization": f"Bearer {token['access_token']}"}
    assert httpx.get(f"{server.api_url}/database/epoch", headers=headers
                     ).status_code == 200
    time.sleep(2.5)
    expired = httpx.get(f"{server.api_url}/database/epoch", headers=headers)
    assert expired.status_code == 401
    assert expired.json() == {"detail": "Could not validate credentials"}


def test_empty_server_uses_the_fallback_default(tmp_path: Path) -> None:
    server = KGServer(tmp_path / "empty", corpus="none").start()
    try:
        with server.client("admin") as http:
            assert http.get("/health").json()["status"] == "degraded"
            body = http.get(THRESHOLD).json()
            assert {k: body[k] for k in ("key", "threshold", "fallback")} == {
                "key": "search_default_similarity_threshold", "threshold": None,
                "fallback": 0.6}
            assert body["source"] == "fallback"
            body = http.post("/query/search", json={"query": RELEVANT}).json()
            assert body["threshold_used"] == 0.6 and body["count"] == 0
            assert http.get("/catalog/children").json()["total"] == 0
    finally:
        assert server.stop() in (0, -15)  # uvicorn re-raises SIGTERM after a clean shutdown
