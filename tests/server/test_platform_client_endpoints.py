"""The endpoints the platform's own FUSE client calls besides ours, in the contract's
shapes; and the request caps (413/422 with short echoes and short log lines)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from kg_fuse.limits import MAX_BODY_BYTES, MAX_INGEST_BYTES, MAX_QUERY_CHARS
from tests.helpers.server import KGServer

COMPRESSION = "Data Compression and Archiving"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 200


@pytest.fixture(scope="module")
def http(kg_server: KGServer) -> httpx.Client:
    return kg_server.client("user")


def documents(http: httpx.Client, ontology: str = COMPRESSION) -> dict[str, str]:
    ont = {n["name"]: n["id"] for n in http.get("/catalog/children").json()["nodes"]}
    body = http.get("/catalog/children", params={"parent": ont[ontology],
                                                 "parent_kind": "ontology"}).json()
    return {n["name"]: n["id"] for n in body["nodes"]}


def test_document_concepts_in_the_contract_shape(http):
    doc_id = next(iter(documents(http).values()))
    body = http.get(f"/documents/{doc_id}/concepts").json()
    assert set(body) == {"document_id", "filename", "concepts", "total", "warnings"}
    assert body["document_id"] == doc_id and body["filename"]
    assert body["total"] == len(body["concepts"]) > 0
    rows = body["concepts"]
    assert all(set(r) == {"concept_id", "name", "source_id", "instance_count"} for r in rows)
    assert all(r["instance_count"] >= 1 and r["name"] for r in rows)
    keys = [(-r["instance_count"], r["name"]) for r in rows]
    assert keys == sorted(keys)
    assert len({(r["concept_id"], r["source_id"]) for r in rows}) == len(rows)


def test_unknown_document_concepts_is_404(http):
    response = http.get("/documents/sha256:nope/concepts")
    assert response.status_code == 404
    assert response.json() == {"detail": "Document not found: sha256:nope"}


def test_endpoints_need_a_token(kg_server):
    anonymous = httpx.Client(base_url=kg_server.api_url)
    for method, path in [("GET", "/documents/x/concepts"), ("DELETE", "/documents/x"),
                         ("GET", "/sources/x/image"), ("POST", "/ingest/image")]:
        assert anonymous.request(method, path).status_code == 401, path


def test_delete_document_removes_it_its_evidence_and_orphans(kg_server_clone):
    server = kg_server_clone()
    http = server.client("user")
    epoch = http.get("/database/epoch").json()["epoch"]
    name, doc_id = sorted(documents(http).items())[0]
    concepts = {r["concept_id"] for r in http.get(f"/documents/{doc_id}/concepts").json()
                ["concepts"]}
    response = http.delete(f"/documents/{doc_id}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"document_id", "deleted", "sources_deleted",
                         "orphaned_concepts_deleted"}
    assert body["document_id"] == doc_id and body["deleted"] is True
    assert body["sources_deleted"] > 0 and body["orphaned_concepts_deleted"] >= 1
    assert name not in documents(http)
    assert http.get("/database/epoch").json()["epoch"] > epoch
    assert http.get(f"/documents/{doc_id}/content").status_code == 404
    gone = [c for c in concepts if http.get(f"/query/concept/{c}").status_code == 404]
    assert len(gone) == body["orphaned_concepts_deleted"]
    again = http.delete(f"/documents/{doc_id}")
    assert again.status_code == 404
    assert again.json() == {"detail": f"Document '{doc_id}' not found"}


@pytest.mark.parametrize(("filename", "data", "detail"), [
    ("notes.txt", PNG, "Unsupported image format"),
    ("tiny.png", PNG[:50], "Image too small"),
    ("huge.png", PNG + b"\0" * (10 * 1024 * 1024), "Image too large"),
    ("fine.png", PNG, "no vision model"),
])
def test_image_ingest_is_refused_with_a_reason(http, filename, data, detail):
    response = http.post("/ingest/image", data={"ontology": COMPRESSION},
                         files={"file": (filename, data, "image/png")})
    assert response.status_code == 400
    assert detail in response.json()["detail"]


def test_source_image_404_and_400(http):
    missing = http.get("/sources/nope/image")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Source not found: nope"}
    doc_id = next(iter(documents(http).values()))
    source = http.get(f"/documents/{doc_id}/concepts").json()["concepts"][0]["source_id"]
    text = http.get(f"/sources/{source}/image")
    assert text.status_code == 400
    assert text.json() == {
        "detail": f"Source {source} is not an image (content_type='document')"}


# -- caps ------------------------------------------------------------------------------


def test_an_oversized_body_is_413_before_it_is_read(http, kg_server):
    started = time.monotonic()
    response = http.post("/query/search", content=b'{"query": "' + b"a" * (20 << 20) + b'"}',
                         headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "too large" in response.json()["detail"]
    assert time.monotonic() - started < 30  # 31 s of CPU for 20 MB before the cap
    log = Path(kg_server.log_path).read_text(errors="replace")
    assert "a" * 1000 not in log


def test_an_oversized_upload_is_413(http):
    big = b"x" * (MAX_INGEST_BYTES + 1)
    response = http.post("/ingest", data={"ontology": "cap test"},
                         files={"file": ("big.txt", big, "text/plain")})
    assert response.status_code == 413


def test_a_long_query_is_a_422_that_echoes_a_prefix_only(http, kg_server):
    text = "q" * (MAX_QUERY_CHARS + 1)
    assert len(text) < MAX_BODY_BYTES
    response = http.post("/query/search", json={"query": text})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", "query"] and detail[0]["type"] == "string_too_long"
    assert len(response.text) < 2000
    log = Path(kg_server.log_path).read_text(errors="replace")
    assert "q" * 1000 not in log


def test_huge_catalog_offset_is_422_not_500(http):
    response = http.get("/catalog/children", params={"offset": 10**28})
    assert response.status_code == 422


def test_the_access_log_holds_a_prefix_of_a_long_url(http, kg_server):
    marker = "longurl" * 400
    http.get("/catalog/children", params={"q": marker[:900]})
    log = Path(kg_server.log_path).read_text(errors="replace")
    assert "longurl" in log and marker[:900] not in log


def test_a_long_but_accepted_query_is_logged_as_a_prefix(http, kg_server):
    text = "zlib " * 1000
    response = http.post("/query/search", json={"query": text, "limit": 1})
    assert response.status_code == 200
    log = Path(kg_server.log_path).read_text(errors="replace")
    assert text[:300] not in log and "(5000 characters)" in log
