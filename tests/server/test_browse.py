"""Read-only browsing endpoints: epoch, catalog, ontology, documents, concept details."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.helpers.server import KGServer

COMPRESSION = "Data Compression and Archiving"
NODE_FIELDS = {"kind", "id", "name", "parent_id", "child_count", "content_type", "properties"}
INSTANCE_FIELDS = {"quote", "document", "paragraph", "source_id", "full_text", "content_type",
                   "has_image", "image_uri", "storage_key", "filename", "source_type",
                   "source_path", "source_hostname"}


@pytest.fixture(scope="module")
def http(kg_server: KGServer) -> httpx.Client:
    return kg_server.client("user")


def ontologies(http: httpx.Client) -> dict[str, dict]:
    body = http.get("/catalog/children").json()
    return {n["name"]: n for n in body["nodes"]}


def documents_of(http: httpx.Client, ontology_id: str) -> dict[str, dict]:
    body = http.get("/catalog/children",
                    params={"parent": ontology_id, "parent_kind": "ontology"}).json()
    return {n["name"]: n for n in body["nodes"]}


def concept_id(http: httpx.Client, label: str) -> str:
    body = http.post("/query/search", json={"query": label, "limit": 100,
                                            "min_similarity": 0.0}).json()
    return next(r["concept_id"] for r in body["results"] if r["label"] == label)


def test_epoch_is_an_int_with_the_default_beside_it(http: httpx.Client) -> None:
    body = http.get("/database/epoch").json()
    assert set(body) == {"epoch", "default_threshold", "threshold_presets",  # these: ours
                         "server_id"}
    assert re.fullmatch(r"[0-9a-f]{32}", body["server_id"])  # who it is: see test_lifecycle
    assert isinstance(body["epoch"], int) and body["epoch"] >= 1
    searched = http.post("/query/search", json={"query": "gzip"}).json()
    assert body["default_threshold"] == searched["threshold_used"]
    assert body["threshold_presets"] == searched["threshold_presets"]


def test_catalog_root_lists_ontologies_with_document_counts(http: httpx.Client) -> None:
    body = http.get("/catalog/children").json()
    assert set(body) == {"parent_id", "parent_kind", "child_kind", "nodes", "total", "limit",
                         "offset", "query", "stale"}
    assert body["child_kind"] == "ontology" and body["parent_id"] is None
    assert body["total"] == len(body["nodes"]) and body["limit"] == 100
    names = [n["name"] for n in body["nodes"]]
    assert names == sorted(names, key=str.lower)
    node = {n["name"]: n for n in body["nodes"]}[COMPRESSION]
    assert set(node) == NODE_FIELDS
    assert node["id"].startswith("ont_") and node["kind"] == "ontology"
    assert node["child_count"] == 7  # gzip bz2 lzma zipfile tarfile + bz2/lzma .pydoc


def test_catalog_lists_documents_of_an_ontology(http: httpx.Client) -> None:
    ont = ontologies(http)[COMPRESSION]
    docs = documents_of(http, ont["id"])
    assert set(docs) == {"gzip", "bz2", "lzma", "zipfile", "tarfile", "bz2.pydoc",
                         "lzma.pydoc"}
    gzip_node = docs["gzip"]
    assert gzip_node["id"].startswith("sha256:") and len(gzip_node["id"]) == 7 + 64
    assert gzip_node["content_type"] == "document" and gzip_node["parent_id"] == ont["id"]
    assert gzip_node["child_count"] > 3


def test_catalog_paging_filter_and_sort(http: httpx.Client) -> None:
    everything = http.get("/catalog/children").json()
    seen = []
    offset = 0
    while True:
        page = http.get("/catalog/children", params={"limit": 2, "offset": offset}).json()
        assert page["total"] == everything["total"] and page["limit"] == 2
        if not page["nodes"]:
            break
        seen += [n["id"] for n in page["nodes"]]
        offset += 2
    assert seen == [n["id"] for n in everything["nodes"]]
    filtered = http.get("/catalog/children", params={"q": "compression"}).json()
    assert [n["name"] for n in filtered["nodes"]] == [COMPRESSION]
    assert filtered["query"] == "compression" and filtered["total"] == 1
    by_count = http.get("/catalog/children", params={"sort": "child_count"}).json()["nodes"]
    counts = [n["child_count"] for n in by_count]
    assert counts == sorted(counts, reverse=True)
    for params in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"sort": "size"}):
        assert http.get("/catalog/children", params=params).status_code == 422


def test_catalog_unknown_parent_is_404(http: httpx.Client) -> None:
    response = http.get("/catalog/children", params={"parent": "ont_nope",
                                                     "parent_kind": "ontology"})
    assert response.status_code == 404


def test_ontology_info(http: httpx.Client) -> None:
    response = http.get(f"/ontology/{quote(COMPRESSION)}")
    assert response.status_code == 200
    body = response.json()
    assert body["ontology"] == COMPRESSION
    stats = body["statistics"]
    assert set(stats) == {"source_count", "file_count", "concept_count", "instance_count",
                          "relationship_count"}
    # gzip bz2 lzma zipfile tarfile from source, plus the compiled halves of bz2 and lzma
    assert stats["file_count"] == len(body["files"]) == 7 and stats["concept_count"] > 50
    assert stats["instance_count"] >= stats["concept_count"]
    assert {"gzip.py", "lzma.pydoc"} <= set(body["files"])
    assert set(body["node"]) == {"ontology_id", "name", "description", "lifecycle_state",
                                 "creation_epoch", "has_embedding", "search_terms",
                                 "created_by"}
    assert http.get("/ontology/Nope").status_code == 404


def test_document_content_is_the_original_source(http: httpx.Client) -> None:
    ont = ontologies(http)[COMPRESSION]
    doc_id = documents_of(http, ont["id"])["gzip"]["id"]
    response = http.get(f"/documents/{doc_id}/content")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"document_id", "content_type", "content", "chunks"}
    source = (Path(sysconfig.get_paths()["stdlib"]) / "gzip.py").read_text(encoding="utf-8")
    assert body["content"] == {"document": source, "encoding": "utf-8"}
    assert body["content_type"] == "document" and body["document_id"] == doc_id
    chunk = body["chunks"][1]
    assert set(chunk) == {"source_id", "paragraph", "full_text", "char_offset_start",
                          "char_offset_end"}
    literal = source[chunk["char_offset_start"]:chunk["char_offset_end"]]
    assert literal.startswith('"""')
    assert chunk["full_text"].splitlines()[0] in literal
    missing = http.get("/documents/sha256:0000/content")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "Document not found: sha256:0000"}


def test_concept_details(http: httpx.Client) -> None:
    cid = concept_id(http, "gzip.GzipFile.fileno")
    body = http.get(f"/query/concept/{cid}").json()
    assert body["label"] == "gzip.GzipFile.fileno" and body["embedding"] is None
    assert body["documents"] == [COMPRESSION]
    assert isinstance(body["search_terms"], list) and isinstance(body["description"], str)
    assert body["instances"]
    for instance in body["instances"]:
        assert set(instance) == INSTANCE_FIELDS
        assert isinstance(instance["quote"], str) and isinstance(instance["full_text"], str)
        assert instance["filename"] == "gzip.py" and instance["document"] == COMPRESSION
    rels = {(r["rel_type"], r["to_label"]) for r in body["relationships"]}
    assert ("METHOD_OF", "gzip.GzipFile") in rels
    assert ("DEFINED_IN", "gzip") in rels
    similar = [r for r in body["relationships"] if r["rel_type"] == "SIMILAR_TO"]
    assert len(similar) == 3
    assert all(0 < r["confidence"] <= 1 and r["to_id"] for r in similar)


def test_unknown_concept_is_404(http: httpx.Client) -> None:
    response = http.get("/query/concept/c_missing")
    assert response.status_code == 404
    assert response.json() == {"detail": "Concept 'c_missing' not found"}


def test_catalog_lists_concepts_of_a_document(http: httpx.Client) -> None:
    ont = ontologies(http)[COMPRESSION]
    gzip_doc = documents_of(http, ont["id"])["gzip"]
    body = http.get("/catalog/children", params={"parent": gzip_doc["id"],
                                                 "parent_kind": "document"}).json()
    assert body["child_kind"] == "concept" and body["parent_kind"] == "document"
    assert body["total"] == gzip_doc["child_count"] == len(body["nodes"])
    names = {n["name"] for n in body["nodes"]}
    assert {"gzip", "gzip.compress", "gzip.GzipFile"} <= names
    assert all(n["kind"] == "concept" and n["id"].startswith("c_") for n in body["nodes"])
