"""The knowledge graph with the real model on a small Markdown corpus: incremental index
updates, near-duplicate warnings, the default's provenance and the recalibration rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from kg_fuse.server import calibrate
from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.embedder import Embedder
from kg_fuse.server.index import ConceptIndex
from kg_fuse.server.jobs import JobRunner
from kg_fuse.server.service import KnowledgeGraph
from kg_fuse.server.store import Store

SAUCES = """# Sauces

## Making a roux
Cook equal weights of butter and flour together, stirring, before adding liquid.

## Béchamel
Whisk hot milk into a white roux and simmer until it coats a spoon.
"""

BREAD = """# Bread

## Kneading dough
Push the dough away with the heel of your hand, fold it back and turn it.

## Proving
Leave the shaped dough somewhere warm until it has doubled in size.
"""

# The roux section again, word for word, in another document.
COPY = """# Notes

## Roux basics
Cook equal weights of butter and flour together, stirring, before adding liquid.
"""


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
def graph(tmp_path: Path, embedder: Embedder) -> KnowledgeGraph:
    graph = KnowledgeGraph(Store(tmp_path / "kg.sqlite3"), embedder)
    graph.prepare(corpus="none", progress=False)
    return graph


def doc(text: str, name: str, ontology: str = "kitchen"):
    return parse_text_document(text, name, ontology)


def ranking(index: ConceptIndex, graph: KnowledgeGraph, query: str) -> list[tuple[str, float]]:
    vector = graph.embedder.encode_one(query)
    return [(c, round(s, 5)) for c, s in index.search(
        vector, 0.0, keyword=graph.keyword_scores(query, index))]


def admin_default(graph: KnowledgeGraph) -> None:
    """An administrator's default: no recalibration (faster tests not about it)."""
    graph.set_threshold(0.5)


def test_ingest_and_delete_update_the_index_in_place(graph: KnowledgeGraph) -> None:
    admin_default(graph)
    sauces = doc(SAUCES, "sauces.md")
    graph.add_documents([sauces])
    before = graph.index
    graph.add_documents([doc(BREAD, "bread.md", "baking")])
    assert len(graph.index) == len(before) + 3 and len(before) == 3
    assert ranking(before, graph, "knead the dough") != ranking(graph.index, graph,
                                                                  "knead the dough")
    fresh = ConceptIndex.load(graph.store)
    for query in ("knead the dough", "white sauce with milk"):
        assert ranking(graph.index, graph, query) == ranking(fresh, graph, query)
    baking = graph.search("knead the dough", 0.0, 10, 0, "baking").page
    kitchen = graph.search("knead the dough", 0.0, 10, 0, "kitchen").page
    assert len(baking) == 3 and len(kitchen) == 3
    assert not {c for c, _ in baking} & {c for c, _ in kitchen}
    graph.remove_document(sauces.id)
    assert len(graph.index) == 3
    labels = {r["id"]: r["label"] for r in graph.store.query("SELECT id, label FROM concepts")}
    assert all(labels.get(cid) for cid in graph.index.ids)
    assert ranking(graph.index, graph, "roux") == ranking(ConceptIndex.load(graph.store),
                                                          graph, "roux")
    graph.remove_ontology("baking")
    assert len(graph.index) == 0


def test_near_duplicate_section_is_a_warning_not_an_error(graph: KnowledgeGraph) -> None:
    admin_default(graph)
    runner = JobRunner(graph)
    first = runner.insert("h1", "sauces.md", "kitchen", "test")
    runner._work(first, SAUCES, "sauces.md", "kitchen")
    assert "warnings" not in runner.get(first)["result"]
    second = runner.insert("h2", "notes.md", "kitchen", "test")
    runner._work(second, COPY, "notes.md", "kitchen")
    job = runner.get(second)
    assert job["status"] == "completed" and job["error"] is None
    assert job["result"]["concepts_created"] == 2
    warnings = job["result"]["warnings"]
    assert len(warnings) == 1 and "'Roux basics'" in warnings[0] \
        and "'Making a roux'" in warnings[0]
    dup = job["result"]["near_duplicates"][0]
    assert dup["similarity"] > 0.92 and dup["similar_label"] == "Making a roux"
    third = runner.insert("h3", "bread.md", "baking", "test")
    runner._work(third, BREAD, "bread.md", "baking")
    assert "warnings" not in runner.get(third)["result"]


def test_calibrated_default_follows_the_corpus_but_an_admin_value_stays(
        graph: KnowledgeGraph) -> None:
    graph.add_documents([doc(SAUCES, "sauces.md")])
    prov = graph.provenance()
    assert prov["source"] == "calibrated" and prov["concept_count"] == 3
    report = graph.store.get_json_setting(calibrate.CALIBRATION_KEY)
    assert graph.stored_threshold() == report["default"]
    # +1 concept of 3 is more than 20%: recalibrated on 6 (bread adds 3)
    graph.add_documents([doc(BREAD, "bread.md")])
    assert graph.provenance()["concept_count"] == 6
    graph.set_threshold(0.77, provenance={"source": "administrator", "set_by": "admin",
                                          "set_at": "now"})
    graph.add_documents([doc(COPY, "notes.md")])
    assert graph.stored_threshold() == 0.77
    assert graph.provenance() == {"source": "administrator", "set_by": "admin",
                                  "set_at": "now"}


def test_small_change_keeps_the_calibrated_default(graph: KnowledgeGraph) -> None:
    many = "\n".join(f"## Recipe {i}\nStep {i}: combine the ingredients for dish {i}.\n"
                     for i in range(12))
    graph.add_documents([doc("# Book\n" + many, "book.md")])
    calibrated = graph.provenance()
    graph.add_documents([doc(COPY, "notes.md")])  # 1 more of 12: under 20%
    assert graph.provenance() == calibrated
