"""Strict parsing of the API's JSON bodies: a wrong shape is a ServerFault."""

from __future__ import annotations

import copy
import math

import pytest

from kg_fuse.client.errors import ServerFault
from kg_fuse.client.models import ConceptDetail, SearchResponse


def result(**overrides):
    body = {
        "concept_id": "c1",
        "label": "Gzip",
        "description": "A compressor",
        "score": 0.82,
        "documents": ["ontology-a"],
        "evidence_count": 2,
        "grounding_strength": None,
    }
    body.update(overrides)
    return body


def search(**overrides):
    body = {
        "query": "compress data",
        "count": 1,
        "results": [result()],
        "below_threshold_count": None,
        "suggested_threshold": None,
        "top_match": None,
        "threshold_used": 0.47,
        "offset": 0,
    }
    body.update(overrides)
    return body


def test_a_below_threshold_count_that_fills_the_hint_s_look_is_a_floor():
    """The contract's hint counts near misses over twice the page's limit: a count that
    fills it may be short of the truth (the status says "at least")."""
    full = search(results=[result()], below_threshold_count=11)  # 12 = 2 x 6 looked at
    assert SearchResponse.parse(full, limit=6).below_threshold_floor
    assert not SearchResponse.parse(full, limit=7).below_threshold_floor  # 12 < 14
    assert not SearchResponse.parse(full).below_threshold_floor  # the limit unknown
    assert not SearchResponse.parse(search(), limit=1).below_threshold_floor  # none sent


def test_search_response_parses():
    resp = SearchResponse.parse(search())
    assert resp.query == "compress data"
    assert resp.threshold_used == 0.47
    (hit,) = resp.results
    assert (hit.concept_id, hit.label, hit.description, hit.score, hit.ontologies) == (
        "c1", "Gzip", "A compressor", 0.82, ("ontology-a",)
    )


def test_unknown_words_are_ours_and_never_break_a_search():
    assert SearchResponse.parse(search()).unknown_words == ()  # the platform sends none
    assert SearchResponse.parse(search(unknown_words=["zyx"])).unknown_words == ("zyx",)
    for odd in ("zyx", 3, {"a": 1}, [1, "zyx", None]):
        assert SearchResponse.parse(search(unknown_words=odd)).unknown_words in ((), ("zyx",))


def test_search_response_with_nothing_found_and_a_suggestion():
    resp = SearchResponse.parse(
        search(results=[], below_threshold_count=7, suggested_threshold=0.31,
               top_match=result(score=0.33), count=0)
    )
    assert resp.results == ()
    assert resp.below_threshold_count == 7
    assert resp.suggested_threshold == 0.31
    assert resp.top_match is not None and resp.top_match.score == 0.33
    # a platform server: just below its best near miss, not its own suggestion (below
    # its *worst* near miss, which lists every near miss: issue 39)
    assert resp.suggestion == 0.33
    weighing = SearchResponse.parse(search(results=[], count=0, suggested_threshold=0.32,
                                           top_match=result(score=0.5871)))
    assert weighing.suggestion == 0.58
    no_top = SearchResponse.parse(search(results=[], count=0, suggested_threshold=0.32))
    assert no_top.suggestion == 0.32


def test_the_suggestion_is_just_below_the_best_near_miss_when_the_server_names_them():
    near = [{"concept_id": "a", "label": "math.sqrt", "score": 0.6167}]
    resp = SearchResponse.parse(
        search(results=[], count=0, suggested_threshold=0.32, top_match=result(score=0.62),
               near_misses=near, near_miss_threshold=0.61))
    assert resp.suggestion == 0.61


def test_nulls_and_missing_optional_fields_are_accepted():
    hit_nulls = result(description=None, documents=None)
    hit_missing = result()
    del hit_missing["description"], hit_missing["documents"]
    resp = SearchResponse.parse(search(results=[hit_nulls, hit_missing]))
    for hit in resp.results:
        assert hit.description == ""
        assert hit.ontologies == ()
    assert resp.below_threshold_count is None
    assert resp.suggested_threshold is None
    assert resp.top_match is None
    body = search()
    for key in ("below_threshold_count", "suggested_threshold", "top_match"):
        del body[key]
    assert SearchResponse.parse(body).top_match is None


def _without(body, key):
    body = copy.deepcopy(body)
    del body[key]
    return body


BAD_SEARCH = {
    "not an object": ["results"],
    "missing results": _without(search(), "results"),
    "results not a list": search(results={"0": result()}),
    "missing query": _without(search(), "query"),
    "missing threshold_used": _without(search(), "threshold_used"),
    "nan threshold_used": search(threshold_used=math.nan),
    "result not an object": search(results=["c1"]),
    "missing score": search(results=[_without(result(), "score")]),
    "string score": search(results=[result(score="0.8")]),
    "bool score": search(results=[result(score=True)]),
    "nan score": search(results=[result(score=math.nan)]),
    "infinite score": search(results=[result(score=math.inf)]),
    "null score": search(results=[result(score=None)]),
    "missing concept_id": search(results=[_without(result(), "concept_id")]),
    "numeric label": search(results=[result(label=5)]),
    "documents not strings": search(results=[result(documents=[1, 2])]),
    "string count": search(below_threshold_count="3"),
    "bool count": search(below_threshold_count=True),
    "nan suggestion": search(suggested_threshold=math.nan),
    "bad top match": search(top_match=result(score="high")),
}


@pytest.mark.parametrize("body", BAD_SEARCH.values(), ids=BAD_SEARCH.keys())
def test_search_response_rejects_wrong_shapes(body):
    with pytest.raises(ServerFault):
        SearchResponse.parse(body)


def detail(**overrides):
    body = {
        "concept_id": "c1",
        "label": "Gzip",
        "description": "A compressor",
        "search_terms": ["gzip"],
        "documents": ["ontology-a"],
        "instances": [
            {
                "quote": "gzip compresses",
                "document": "manual.md",
                "paragraph": 4,
                "source_id": "s1",
                "full_text": None,
                "has_image": None,
            }
        ],
        "relationships": [
            {"to_id": "c2", "to_label": "Deflate", "rel_type": "USES", "confidence": 0.9},
            {"to_id": "c3", "to_label": "Zip", "rel_type": "SIMILAR_TO", "confidence": None},
        ],
        "provenance": None,
    }
    body.update(overrides)
    return body


def test_concept_detail_parses_and_tolerates_null_full_text():
    d = ConceptDetail.parse(detail())
    assert (d.concept_id, d.label, d.description, d.ontologies) == (
        "c1", "Gzip", "A compressor", ("ontology-a",)
    )
    (ev,) = d.evidence
    assert (ev.quote, ev.document, ev.paragraph) == ("gzip compresses", "manual.md", 4)
    assert [(r.rel_type, r.to_id, r.to_label, r.confidence) for r in d.relationships] == [
        ("USES", "c2", "Deflate", 0.9),
        ("SIMILAR_TO", "c3", "Zip", None),
    ]


def test_concept_detail_with_only_the_required_fields():
    d = ConceptDetail.parse({"concept_id": "c1", "label": "Gzip"})
    assert d.description == ""
    assert d.ontologies == ()
    assert d.evidence == ()
    assert d.relationships == ()


def test_concept_detail_with_null_collections_and_sparse_items():
    d = ConceptDetail.parse(
        detail(description=None, documents=None, instances=[{"full_text": None}],
               relationships=[{"to_id": "c9"}])
    )
    assert d.description == ""
    assert d.ontologies == ()
    (ev,) = d.evidence
    assert (ev.quote, ev.document, ev.paragraph) == ("", "", None)
    (rel,) = d.relationships
    assert rel.to_id == "c9"
    assert rel.to_label == "c9"  # falls back to the id so the line is never blank
    assert rel.confidence is None


BAD_DETAIL = {
    "not an object": [],
    "missing label": _without(detail(), "label"),
    "missing concept_id": _without(detail(), "concept_id"),
    "instance not an object": detail(instances=["quote"]),
    "relationship not an object": detail(relationships=["c2"]),
    "non-numeric confidence": detail(
        relationships=[{"to_id": "c2", "to_label": "D", "rel_type": "USES", "confidence": "hi"}]
    ),
    "nan confidence": detail(
        relationships=[{"to_id": "c2", "to_label": "D", "rel_type": "USES",
                        "confidence": math.nan}]
    ),
    "documents not strings": detail(documents="ontology-a"),
}


@pytest.mark.parametrize("body", BAD_DETAIL.values(), ids=BAD_DETAIL.keys())
def test_concept_detail_rejects_wrong_shapes(body):
    with pytest.raises(ServerFault):
        ConceptDetail.parse(body)


def platform_concept(instances, provenance):
    """A concept as the platform answers it (shape taken from a real answer): each
    instance's ``filename`` is any document of its ontology, ``provenance`` is right."""
    return {"concept_id": "sha256:2cb31_chunk1_8a92bea6", "label": "Knead bread dough",
            "description": "", "search_terms": [], "embedding": None,
            "documents": ["Kitchen"], "relationships": [],
            "instances": [{"quote": "Knead bread dough until it is smooth.",
                           "document": "Kitchen", "paragraph": 1, "full_text": None,
                           **inst} for inst in instances],
            "provenance": {"filename": None, "documents": [
                {"document_id": doc_id, "filename": name, "source_type": None,
                 "ingested_by": "1000", "source_count": 1}
                for doc_id, name in provenance]}}


BREAD = "sha256:2cb3151f08d80" + "0" * 44
EGGS = "sha256:78e267980fadc" + "0" * 44


def test_evidence_names_the_document_its_source_belongs_to_not_the_ontologys_first():
    detail = ConceptDetail.parse(platform_concept(
        [{"source_id": "sha256:2cb31_chunk1", "filename": "eggs.md"},
         {"source_id": "sha256:78e26_chunk3", "filename": "eggs.md"}],
        [(BREAD, "bread.md"), (EGGS, "eggs.md")]))
    assert [e.filename for e in detail.evidence] == ["bread.md", "eggs.md"]


def test_evidence_of_a_concept_from_one_document_names_it_whatever_its_source_ids():
    detail = ConceptDetail.parse(platform_concept(
        [{"source_id": "notes.md_chunk2", "filename": "eggs.md"}], [(BREAD, "bread.md")]))
    assert [e.filename for e in detail.evidence] == ["bread.md"]


def test_evidence_keeps_the_servers_filename_without_provenance_to_tell():
    body = platform_concept([{"source_id": "x_chunk1", "filename": "eggs.md"}], [])
    body["provenance"] = None
    assert [e.filename for e in ConceptDetail.parse(body).evidence] == ["eggs.md"]
    body["provenance"] = {"documents": [{"document_id": 3, "filename": None}]}  # malformed
    assert [e.filename for e in ConceptDetail.parse(body).evidence] == ["eggs.md"]
