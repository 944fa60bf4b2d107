"""The corpus builders' views (signature, description, examples) and their storage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from kg_fuse.server import content
from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.corpus.stdlib import build_stdlib_corpus
from kg_fuse.server.store import Store
from tests.helpers.server import KGServer


def _concepts(modules: list[str]) -> dict:
    return {c.label: c for d in build_stdlib_corpus(modules) for c in d.concepts}


def test_source_modules_give_signatures_and_examples() -> None:
    concepts = _concepts(["textwrap", "fnmatch"])
    dedent = concepts["textwrap.dedent"]
    assert dedent.signature == "dedent(text)"
    assert dedent.description.startswith("Remove any common leading whitespace")
    assert dedent.examples and dedent.description not in dedent.examples
    wrapper = concepts["textwrap.TextWrapper"]
    assert wrapper.signature.startswith("TextWrapper(width=70")  # no ``self``
    assert concepts["fnmatch.filter"].signature == "filter(names, pat)"


def test_markdown_sections_split_into_description_and_examples() -> None:
    text = ("# Bread\n\nBake bread at home.\n\nKnead for ten minutes.\n\nProve twice.\n\n"
            "## Rye\n\nOnly one paragraph.\n")
    doc = parse_text_document(text, "bread.md", "kitchen")
    bread, rye = doc.concepts
    assert (bread.label, bread.description) == ("Bread", "Bake bread at home.")
    assert bread.examples == "Knead for ten minutes.\n\nProve twice."
    assert (rye.signature, rye.examples) == ("", "")


def test_old_store_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "kg.sqlite3"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE concepts (id TEXT PRIMARY KEY, label TEXT NOT NULL, "
                "description TEXT NOT NULL DEFAULT '', search_terms TEXT NOT NULL "
                "DEFAULT '[]', created_at REAL NOT NULL)")
    old.execute("INSERT INTO concepts VALUES ('c_old', 'old', 'kept', '[]', 0)")
    old.commit()
    old.close()
    store = Store(path)
    try:
        row = store.query_one("SELECT label, description, signature, examples "
                              "FROM concepts WHERE id = 'c_old'")
        assert tuple(row) == ("old", "kept", "", "")
        content.write_documents(store, build_stdlib_corpus(["fnmatch"]))
        stored = store.query_one("SELECT signature FROM concepts WHERE label = ?",
                                 ("fnmatch.fnmatch",))
        assert stored["signature"] == "fnmatch(name, pat)"
    finally:
        store.close()
    Store(path).close()  # reopening a migrated store is a no-op


@pytest.fixture(scope="module")
def http(kg_server: KGServer) -> httpx.Client:
    return kg_server.client("user")


def test_concept_details_carry_the_signature(http: httpx.Client) -> None:
    hits = http.post("/query/search", json={"query": "filter names matching a shell pattern",
                                            "min_similarity": 0.0, "limit": 20}).json()
    by_label = {r["label"]: r["concept_id"] for r in hits["results"]}
    assert "fnmatch.filter" in by_label
    body = http.get(f"/query/concept/{by_label['fnmatch.filter']}").json()
    assert body["signature"] == "filter(names, pat)"
