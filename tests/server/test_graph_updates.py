"""The knowledge graph with the real model on a small Markdown corpus: incremental index
updates, near-duplicate warnings, the default's provenance and the recalibration rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.knowledge.jobs import JobRunner, QueuedJob
from kg_fuse.server.search.index import ConceptIndex
from kg_fuse.server.startup.prepare import prepare
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold import calibrate
from kg_fuse.server.threshold.keys import CALIBRATION_KEY

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
    prepare(graph, corpus="none", progress=False)
    return graph


def doc(text: str, name: str, ontology: str = "kitchen"):
    return parse_text_document(text, name, ontology)


def ranking(index: ConceptIndex, graph: KnowledgeGraph, query: str) -> list[tuple[str, float]]:
    reading = graph.searcher.read(query)
    vector, keyword = graph.searcher.scored_query(
        reading, graph.embedder.encode_one(reading.embedded_text(query)), index)
    return [(c, round(s, 5)) for c, s in index.search(vector, 0.0, keyword=keyword)]


def admin_default(graph: KnowledgeGraph) -> None:
    """An administrator's default: no recalibration (faster tests not about it)."""
    graph.threshold.set(0.5)


def test_ingest_and_delete_update_the_index_in_place(graph: KnowledgeGraph) -> None:
    admin_default(graph)
    sauces = doc(SAUCES, "sauces.md")
    graph.changes.add_documents([sauces])
    before = graph.index
    graph.changes.add_documents([doc(BREAD, "bread.md", "baking")])
    assert len(graph.index) == len(before) + 3 and len(before) == 3
    assert ranking(before, graph, "knead the dough") != ranking(graph.index, graph,
                                                                  "knead the dough")
    fresh = ConceptIndex.load(graph.store)
    for query in ("knead the dough", "white sauce with milk"):
        assert ranking(graph.index, graph, query) == ranking(fresh, graph, query)
    baking = graph.searcher.search("knead the dough", 0.0, 10, 0, "baking").page
    kitchen = graph.searcher.search("knead the dough", 0.0, 10, 0, "kitchen").page
    assert len(baking) == 3 and len(kitchen) == 3
    assert not {c for c, _ in baking} & {c for c, _ in kitchen}
    graph.changes.remove_document(sauces.id)
    assert len(graph.index) == 3
    labels = {r["id"]: r["label"] for r in graph.store.query("SELECT id, label FROM concepts")}
    assert all(labels.get(cid) for cid in graph.index.ids)
    assert ranking(graph.index, graph, "roux") == ranking(ConceptIndex.load(graph.store),
                                                          graph, "roux")
    graph.changes.remove_ontology("baking")
    assert len(graph.index) == 0


def test_near_duplicate_section_is_a_warning_not_an_error(graph: KnowledgeGraph) -> None:
    admin_default(graph)
    runner = JobRunner(graph.changes, graph.store)
    first = runner.insert("h1", "sauces.md", "kitchen", "test")
    runner._work(QueuedJob(first, SAUCES, "sauces.md", "kitchen", "test", 0))
    assert "warnings" not in runner.get(first)["result"]
    second = runner.insert("h2", "notes.md", "kitchen", "test")
    runner._work(QueuedJob(second, COPY, "notes.md", "kitchen", "test", 0))
    job = runner.get(second)
    assert job["status"] == "completed" and job["error"] is None
    assert job["result"]["concepts_created"] == 2
    warnings = job["result"]["warnings"]
    assert len(warnings) == 1 and "'Roux basics'" in warnings[0] \
        and "'Making a roux'" in warnings[0]
    dup = job["result"]["near_duplicates"][0]
    assert dup["similarity"] > 0.92 and dup["similar_label"] == "Making a roux"
    third = runner.insert("h3", "bread.md", "baking", "test")
    runner._work(QueuedJob(third, BREAD, "bread.md", "baking", "test", 0))
    assert "warnings" not in runner.get(third)["result"]


def test_calibrated_default_follows_the_corpus_but_an_admin_value_stays(
        graph: KnowledgeGraph) -> None:
    graph.changes.add_documents([doc(SAUCES, "sauces.md")])
    prov = graph.threshold.provenance()
    assert prov["source"] == "calibrated" and prov["concept_count"] == 3
    report = graph.store.get_json_setting(CALIBRATION_KEY)
    assert graph.threshold.stored() == report["default"]
    # +1 concept of 3 is more than 20%: recalibrated on 6 (bread adds 3)
    graph.changes.add_documents([doc(BREAD, "bread.md")])
    assert graph.threshold.provenance()["concept_count"] == 6
    graph.threshold.set(0.77, provenance={"source": "administrator", "set_by": "admin",
                                          "set_at": "now"})
    graph.changes.add_documents([doc(COPY, "notes.md")])
    assert graph.threshold.stored() == 0.77
    assert graph.threshold.provenance() == {"source": "administrator", "set_by": "admin",
                                  "set_at": "now"}


def test_a_default_calibrated_by_an_earlier_rule_is_calibrated_again(
        graph: KnowledgeGraph) -> None:
    """An upgrade that changes how the floor is measured (one noise sample, then the
    median of several) gives a calibrated default by the new rule at the next start; an
    administrator's value is never touched."""
    graph.changes.add_documents([doc(SAUCES, "sauces.md")])
    report = graph.store.get_json_setting(CALIBRATION_KEY)
    assert not graph.threshold.recalibrate_if_drifted()  # same corpus, same rule
    report["rule"] = "default = ceil((3rd-highest per-concept noise score + 0.03) * 100) / 100"
    report["sample_floors"] = []
    graph.store.set_setting(CALIBRATION_KEY, json.dumps(report))
    assert graph.threshold.recalibrate_if_drifted()
    again = graph.store.get_json_setting(CALIBRATION_KEY)
    assert again["rule"] == calibrate.RULE and len(again["sample_floors"]) == calibrate.ROUNDS
    assert graph.threshold.stored() == again["default"]
    graph.threshold.set(0.77, provenance={"source": "administrator", "set_by": "admin",
                                          "set_at": "now"})
    graph.store.set_setting(CALIBRATION_KEY, json.dumps(report))
    assert not graph.threshold.recalibrate_if_drifted()
    assert graph.threshold.stored() == 0.77


def test_small_change_keeps_the_calibrated_default(graph: KnowledgeGraph) -> None:
    many = "\n".join(f"## Recipe {i}\nStep {i}: combine the ingredients for dish {i}.\n"
                     for i in range(12))
    graph.changes.add_documents([doc("# Book\n" + many, "book.md")])
    calibrated = graph.threshold.provenance()
    graph.changes.add_documents([doc(COPY, "notes.md")])  # 1 more of 12: under 20%
    assert graph.threshold.provenance() == calibrated


async def test_near_duplicates_are_the_documents_status(graph: KnowledgeGraph) -> None:
    """The catalog listing and the document's concepts carry the warnings (real app)."""
    import httpx

    from kg_fuse.server.api import auth
    from kg_fuse.server.api.app import create_app

    admin_default(graph)
    graph.changes.add_documents([doc(SAUCES, "sauces.md"), doc(BREAD, "bread.md")])
    copy = doc(COPY, "notes.md")
    outcome = graph.changes.add_documents([copy])
    assert len(outcome.near_duplicates) == 1
    user = auth.replace_clients(graph.store)["user"]
    token = auth.issue_token(graph.store, auth.verify_client(
        graph.store, user["client_id"], user["client_secret"]), 3600).access_token
    transport = httpx.ASGITransport(app=create_app(graph, token_ttl=3600))
    async with httpx.AsyncClient(transport=transport, base_url="http://kg",
                                 headers={"Authorization": f"Bearer {token}"}) as http:
        root = (await http.get("/catalog/children")).json()
        kitchen = next(n["id"] for n in root["nodes"] if n["name"] == "kitchen")
        listing = (await http.get("/catalog/children", params={
            "parent": kitchen, "parent_kind": "ontology"})).json()
        status = {n["name"]: n["properties"] for n in listing["nodes"]}
        assert status["bread.md"]["warnings"] == [] == status["sauces.md"]["warnings"]
        warnings = status["notes.md"]["warnings"]
        assert len(warnings) == 1 and "'Roux basics'" in warnings[0] \
            and "'Making a roux'" in warnings[0] and "near-duplicate" in warnings[0]
        assert status["notes.md"]["near_duplicates"][0]["similar_label"] == "Making a roux"
        detail = (await http.get(f"/documents/{copy.id}/concepts")).json()
        assert detail["warnings"] == warnings
        assert (await http.get(f"/documents/{doc(SAUCES, 's.md').id}/concepts")
                ).json()["warnings"] == []


async def test_jobs_run_in_the_apps_lifespan_and_stop_with_it(graph: KnowledgeGraph) -> None:
    """Under trio (anyio, not asyncio): an upload is queued, the lifespan's worker runs it;
    after shutdown no worker is left and an upload is refused with a 503."""
    import httpx
    import trio

    from kg_fuse.server.api import auth
    from kg_fuse.server.api.app import create_app

    admin_default(graph)
    user = auth.replace_clients(graph.store)["user"]
    token = auth.issue_token(graph.store, auth.verify_client(
        graph.store, user["client_id"], user["client_secret"]), 3600).access_token
    app = create_app(graph, token_ttl=3600)

    def client() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://kg",
                                 headers={"Authorization": f"Bearer {token}"})

    async def upload(http: httpx.AsyncClient, text: str, name: str) -> httpx.Response:
        return await http.post("/ingest", data={"ontology": "kitchen"},
                               files={"file": (name, text.encode(), "text/markdown")})

    async with app.router.lifespan_context(app), client() as http:
        first = (await upload(http, SAUCES, "sauces.md")).json()
        second = (await upload(http, BREAD, "bread.md")).json()
        with trio.fail_after(120):
            while (job := (await http.get(f"/jobs/{second['job_id']}")).json())[
                    "status"] not in ("completed", "failed"):
                await trio.sleep(0.1)
        assert job["status"] == "completed" and job["result"]["concepts_created"] == 3
        assert (await http.get(f"/jobs/{first['job_id']}")).json()["status"] == "completed"
    assert not app.state.ctx.jobs.accepting
    async with client() as http:
        refused = await upload(http, COPY, "notes.md")
    assert refused.status_code == 503 and "shutting down" in refused.json()["detail"]


def test_a_document_is_listed_only_once_its_concepts_are_searchable(
        graph: KnowledgeGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user who sees a new document in the catalog and searches for it finds it; the
    epoch a client refreshes on moves only once both are visible."""
    from kg_fuse.server.knowledge import indexing
    from kg_fuse.server.storage import reads

    admin_default(graph)
    graph.changes.add_documents([doc(SAUCES, "sauces.md")])
    seen: dict[str, object] = {}
    real_embed = indexing.embed_missing

    def listed() -> list[str]:
        _, ontology_id = reads.resolve_parent(graph.store, "kitchen", "ontology")
        page = reads.children(graph.store, "document", ontology_id, None, "name",
                                   100, 0)
        return [r["filename"] for r in page.rows]

    def observing_embed(store, embedder, **options):  # the real embedding, observed
        seen["listed while embedding"] = listed()
        seen["epoch while embedding"] = store.epoch()
        return real_embed(store, embedder, **options)

    monkeypatch.setattr(indexing, "embed_missing", observing_embed)
    graph.changes.add_documents([doc(BREAD, "bread.md")])
    assert seen["listed while embedding"] == ["sauces.md"]
    assert sorted(listed()) == ["bread.md", "sauces.md"]
    assert graph.store.epoch() > seen["epoch while embedding"]
    assert ranking(graph.index, graph, "knead the dough")[0][1] > 0.5
    files = reads.ontology_files(graph.store, reads.ontology(
        graph.store, "kitchen")["id"])
    assert files == ["bread.md", "sauces.md"]


def test_a_document_an_interrupted_ingest_left_unlisted_is_taken_out_at_start(
        tmp_path: Path, embedder: Embedder) -> None:
    from kg_fuse.server.storage import reads, writes

    store = Store(tmp_path / "kg.sqlite3")
    writes.write_documents(store, [doc(BREAD, "bread.md")], published=False)
    assert reads.ontology_files(store, reads.ontology(store, "kitchen")["id"]) == []
    graph = KnowledgeGraph(store, embedder)
    prepare(graph, corpus="none", progress=False)
    # its job says "upload the file again": listing it would make that upload a duplicate
    assert reads.ontology_files(store, reads.ontology(store, "kitchen")["id"]) == []
    assert len(graph.index) == 0
    assert store.query_one("SELECT 1 FROM concepts") is None  # nothing half-ingested


def test_the_same_document_twice_in_one_batch_is_stored_once(graph: KnowledgeGraph) -> None:
    admin_default(graph)  # before the fix: IntegrityError, and nothing stored
    graph.changes.add_documents([doc(BREAD, "bread.md"), doc(BREAD, "bread copy.md")])
    assert len(graph.index) == 3


def test_a_query_the_corpus_knows_no_word_of_lists_nothing(graph: KnowledgeGraph) -> None:
    oven = SAUCES + "\n## Oven\nBake at 180 degrees for 25 minutes.\n"
    graph.changes.add_documents([doc(oven, "sauces.md")])
    low = 0.01  # far below any default: only the rule can keep these out
    assert graph.searcher.search("roux butter", low, 50, 0, None).page
    partly = graph.searcher.search("roux zzyzx", low, 50, 0, None).page  # discounted, still found
    assert partly and partly[0][1] < graph.searcher.search("roux", low, 50, 0, None).page[0][1]
    for unknown in ("xkcdq", "zzyzx qwvbn", "180", "180 25", "= :() 87&>6[<8"):
        outcome = graph.searcher.search(unknown, low, 50, 0, None)  # "180" is in the text, no word
        assert outcome.page == [] and outcome.near_miss is None, unknown
    # the calibration measures the same final score: zero everywhere
    noise, known = graph.searcher.search_many(["xkcdq", "roux"], 3)
    assert noise == [] and known[0][1] > 0.3  # noise finds nothing above 0


def scoped(graph: KnowledgeGraph, ontology: str, query: str = "knead the dough") -> list[str]:
    return [c for c, _ in graph.searcher.search(query, 0.3, 10, 0, ontology).page]


def files(graph: KnowledgeGraph, ontology: str) -> list[str]:
    from kg_fuse.server.storage import reads

    return reads.ontology_files(graph.store, reads.ontology(
        graph.store, ontology)["id"])


def test_the_same_file_in_a_second_ontology_is_a_document_there_too(
        graph: KnowledgeGraph) -> None:
    """Duplicates are per ontology, as on the platform: the copy is listed and searchable
    in both, under two document ids, and the index grown in place matches a fresh load."""
    from kg_fuse.server.storage import reads

    admin_default(graph)
    graph.changes.add_documents([doc(BREAD, "bread.md", "kitchen")])
    outcome = graph.changes.add_documents([doc(BREAD, "bread.md", "baking")])
    assert outcome.concepts_created == 0  # the same concepts, with evidence in both
    assert files(graph, "kitchen") == ["bread.md"] == files(graph, "baking")
    kneading = scoped(graph, "kitchen")
    assert kneading and scoped(graph, "baking") == kneading
    fresh = ConceptIndex.load(graph.store)
    assert [c for c, _ in fresh.search(graph.searcher.prepared("knead the dough").vector, 0.3,
                                       ontology="baking")] == kneading
    held = {o: reads.document_in_ontology(graph.store, BREAD, o)
            for o in ("kitchen", "baking", "pastry")}
    assert held["kitchen"] and held["baking"] and held["kitchen"] != held["baking"]
    assert held["pastry"] is None
    summary = graph.search.summaries(kneading[:1])[kneading[0]]
    assert set(summary["documents"]) == {"kitchen", "baking"}


def test_a_forced_reingest_replaces_only_its_own_ontologys_copy(
        graph: KnowledgeGraph) -> None:
    admin_default(graph)
    runner = JobRunner(graph.changes, graph.store)
    for n, ontology in enumerate(("kitchen", "baking", "baking")):  # the last one forced
        job = runner.insert(f"h{n}", "bread.md", ontology, "test")
        runner._work(QueuedJob(job, BREAD, "bread.md", ontology, "test", 0))
        assert runner.get(job)["status"] == "completed"
    assert files(graph, "kitchen") == ["bread.md"] == files(graph, "baking")
    assert scoped(graph, "kitchen") and scoped(graph, "baking") == scoped(graph, "kitchen")
    assert runner.get(job)["result"]["document_id"] != runner.get(
        runner.existing_job("h0", "kitchen")["id"])["result"]["document_id"]


def test_removing_one_copy_leaves_its_concepts_to_the_other(graph: KnowledgeGraph) -> None:
    from kg_fuse.server.storage import reads

    admin_default(graph)
    graph.changes.add_documents([doc(BREAD, "bread.md", "kitchen")])
    graph.changes.add_documents([doc(BREAD, "bread.md", "baking")])
    graph.changes.remove_document(reads.document_in_ontology(graph.store, BREAD, "baking"))
    assert scoped(graph, "baking") == [] and len(scoped(graph, "kitchen")) >= 1
    assert len(graph.index) == 3
    graph.changes.remove_document(reads.document_in_ontology(graph.store, BREAD, "kitchen"))
    assert scoped(graph, "kitchen") == [] and len(graph.index) == 0
    graph.changes.add_documents([doc(BREAD, "bread.md", "baking")])  # and back, under its hash
    assert reads.document_in_ontology(graph.store, BREAD, "baking") == doc(
        BREAD, "b.md").id


def resident_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise KeyError("VmRSS")


def test_an_ingest_job_leaves_no_freed_memory_resident(graph: KnowledgeGraph) -> None:
    """glibc keeps the heap a job's passing arrays freed (the model's arena, the index's
    new matrix): in the soak the server grew by ~45 KiB per concept ingested. The job
    hands it back, so handing back again right after finds next to nothing."""
    import ctypes

    admin_default(graph)
    runner = JobRunner(graph.changes, graph.store)
    text = "# Lanterns\n\n" + "".join(
        f"## Lantern {n}\n\nHow lantern {n} is trimmed, filled with oil and lit at dusk "
        f"in the {('north', 'south', 'east', 'west')[n % 4]} yard.\n\n" for n in range(120))
    runner._work(QueuedJob(runner.insert("sha256:x", "lanterns.md", "yard", "me"), text,
                           "lanterns.md", "yard", "me", len(text)))
    assert graph.store.query_one("SELECT status FROM jobs")["status"] == "completed"
    before = resident_kib()
    ctypes.CDLL(None).malloc_trim(0)
    released = before - resident_kib()
    assert released < 4 * 1024, f"{released / 1024:.1f} MiB freed but still resident"
