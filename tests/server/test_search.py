"""POST /query/search against the real session server (small stdlib corpus)."""

from __future__ import annotations

import re
import string
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from kg_fuse.limits import MAX_QUERY_CHARS, MIB
from tests.helpers.server import KGServer

RELEVANT = "compress data with gzip"
GIBBERISH = "asdfgh qwerty zxcvb"
RESULT_FIELDS = {
    "concept_id", "label", "description", "score", "documents", "evidence_count",
    "grounding_strength", "confidence_level", "confidence_score", "grounding_display",
    "diversity_score", "diversity_related_count", "authenticated_diversity",
    "sample_evidence",
    "why",  # ours: what made the score (docs/server.md)
}


@pytest.fixture(scope="module")
def http(kg_server: KGServer) -> httpx.Client:
    return kg_server.client("user")


def search(http: httpx.Client, query: str, **fields: object) -> dict:
    response = http.post("/query/search", json={"query": query, **fields})
    assert response.status_code == 200, response.text
    return response.json()


def server_default(kg_server: KGServer) -> float:
    with kg_server.client("admin") as admin:
        return admin.get("/admin/config/search-threshold").json()["threshold"]


def test_response_has_every_contract_field(http: httpx.Client) -> None:
    body = search(http, RELEVANT, limit=5)
    assert set(body) == {"query", "count", "results", "below_threshold_count",
                         "suggested_threshold", "top_match", "threshold_used", "offset",
                         "threshold_presets", "unknown_words", "expanded_words",
                         "near_misses", "near_miss_threshold",
                         "repeated_words", "ontology_filter"}  # the last seven: ours
    assert body["ontology_filter"] is None  # no ontology asked
    scoped = search(http, RELEVANT, limit=5, ontology="Data Compression and Archiving")
    assert scoped["ontology_filter"] == "sources"  # applied by the concepts' sources
    assert body["query"] == RELEVANT and body["offset"] == 0
    assert body["unknown_words"] == []  # the corpus uses every word of it
    assert body["repeated_words"] is None
    assert body["count"] == len(body["results"]) == 5
    for result in body["results"]:
        assert set(result) == RESULT_FIELDS
        assert isinstance(result["description"], str)
        assert result["documents"] and all(isinstance(d, str) for d in result["documents"])
        assert result["evidence_count"] >= 1
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)


def test_calibrated_default_separates_gibberish_from_gzip(kg_server: KGServer,
                                                          http: httpx.Client) -> None:
    default = server_default(kg_server)
    assert 0.1 < default < 0.6  # calibrated on the final score, not the platform's 0.6
    relevant = search(http, RELEVANT)
    assert relevant["threshold_used"] == default
    labels = [r["label"] for r in relevant["results"]]
    assert labels[0] == "gzip.compress"
    assert {"gzip.decompress", "gzip.open"} <= set(labels)
    assert all(r["score"] >= default for r in relevant["results"])
    noise = search(http, GIBBERISH)
    assert noise["count"] == 0 and noise["threshold_used"] == default


def test_a_word_said_over_and_over_is_noise_and_said_once_is_searched(
        http: httpx.Client) -> None:
    once = search(http, "gzip")
    assert once["count"] > 0 and once["repeated_words"] is None
    chant = search(http, "gzip gzip gzip")
    assert chant["count"] == 0 and chant["repeated_words"] == ["gzip"]
    assert chant["near_misses"] is None  # noise has no near misses to offer
    assert search(http, "gzip gzip data")["count"] > 0  # one word said once: a query


# Regression test (issue 34): at 0 nonsense listed a full page, every score 0.
def test_explicit_zero_wins_and_a_score_of_0_is_no_match(http: httpx.Client) -> None:
    tail = search(http, RELEVANT, min_similarity=0.0, limit=100, offset=200)
    assert tail["threshold_used"] == 0.0  # explicit 0 wins over the default
    scores = [r["score"] for r in tail["results"]]
    assert scores and 0 < min(scores) < 0.1, scores  # low scores, none of them 0
    noise = search(http, GIBBERISH, min_similarity=0.0, limit=100)
    assert noise["threshold_used"] == 0.0
    assert noise["count"] == 0 and noise["results"] == []  # nothing scores: nothing matches


def test_explicit_value_overrides_default(http: httpx.Client) -> None:
    body = search(http, RELEVANT, min_similarity=0.7)
    assert body["threshold_used"] == 0.7
    assert all(r["score"] >= 0.7 for r in body["results"])
    assert body["count"] >= 2


@pytest.mark.parametrize("fields", [
    {"limit": 101}, {"limit": 0}, {"min_similarity": 1.5}, {"min_similarity": -0.1},
    {"offset": -1}, {"query": ""},
])
def test_invalid_requests_are_422(http: httpx.Client, fields: dict) -> None:
    response = http.post("/query/search", json={"query": RELEVANT, **fields})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert isinstance(detail, list) and {"type", "loc", "msg", "input"} <= set(detail[0])


@pytest.mark.parametrize("field,number", [
    ("min_similarity", "1e309"), ("min_similarity", "NaN"), ("min_similarity", "-Infinity"),
    ("limit", "1e309"), ("offset", "NaN"),
])
def test_numbers_json_cannot_carry_are_422(http: httpx.Client, field: str,
                                           number: str) -> None:
    """1e309 reads as infinity: the refusal echoes it as text (500 before)."""
    body = f'{{"query": "gzip", "{field}": {number}}}'.encode()
    response = http.post("/query/search", content=body,
                         headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", field] and isinstance(error["input"], str)


def test_offset_pages_through_the_same_ranking(http: httpx.Client) -> None:
    full = search(http, RELEVANT, min_similarity=0.2, limit=20)["results"]
    page2 = search(http, RELEVANT, min_similarity=0.2, limit=5, offset=5)
    assert page2["offset"] == 5
    assert [r["concept_id"] for r in page2["results"]] == [r["concept_id"]
                                                           for r in full[5:10]]


def test_ontology_filter_applies_before_paging(http: httpx.Client) -> None:
    body = search(http, RELEVANT, min_similarity=0.0, limit=10, ontology="File Formats")
    assert body["count"] == 10  # a full page although gzip's concepts rank higher overall
    assert all("File Formats" in r["documents"] for r in body["results"])
    second = search(http, RELEVANT, min_similarity=0.0, limit=10, offset=10,
                    ontology="File Formats")
    first_ids = {r["concept_id"] for r in body["results"]}
    assert first_ids.isdisjoint(r["concept_id"] for r in second["results"])
    assert search(http, RELEVANT, ontology="No Such Ontology")["count"] == 0


def test_near_miss_hint_follows_the_rule(http: httpx.Client) -> None:
    threshold, limit = 0.9, 4
    body = search(http, RELEVANT, min_similarity=threshold, limit=limit)
    assert body["count"] < 3
    floor = search(http, RELEVANT, min_similarity=0.3, limit=2 * limit)["results"]
    below = [r for r in floor if r["score"] < threshold]
    assert below, "the probe needs near misses"
    assert body["below_threshold_count"] == len(below)
    assert body["suggested_threshold"] == round(min(r["score"] for r in below) - 0.02, 2)
    assert body["top_match"]["concept_id"] == below[0]["concept_id"]
    assert set(body["top_match"]) == RESULT_FIELDS


def test_no_hint_with_three_or_more_results(http: httpx.Client) -> None:
    body = search(http, RELEVANT, min_similarity=0.5)
    assert body["count"] >= 3
    assert (body["below_threshold_count"], body["suggested_threshold"],
            body["top_match"]) == (None, None, None)


def test_no_hint_at_or_below_point_three(http: httpx.Client) -> None:
    body = search(http, "zzqx vbnq", min_similarity=0.3, limit=1)
    assert body["count"] <= 1
    assert (body["below_threshold_count"], body["suggested_threshold"],
            body["top_match"]) == (None, None, None)


def test_no_hint_when_nothing_reaches_point_three(http: httpx.Client) -> None:
    body = search(http, GIBBERISH, min_similarity=0.99)
    if body["below_threshold_count"] is None:
        assert body["suggested_threshold"] is None and body["top_match"] is None
    else:  # the mash has near misses on this corpus: then the hint must be coherent
        assert body["below_threshold_count"] > 0
        assert body["suggested_threshold"] <= body["top_match"]["score"]


def test_include_evidence_adds_sample_quotes(http: httpx.Client) -> None:
    result = search(http, RELEVANT, limit=1, include_evidence=True)["results"][0]
    evidence = result["sample_evidence"]
    assert evidence and all(isinstance(e["quote"], str) and e["full_text"] for e in evidence)


def test_request_log_says_whether_min_similarity_was_sent(kg_server: KGServer,
                                                          http: httpx.Client) -> None:
    query = "request log probe: tar archive members"
    omitted = search(http, query)
    explicit = search(http, query, min_similarity=0.25)
    lines = [line for line in kg_server.log_text().splitlines()
             if line.endswith(f"query={query!r}")]
    pattern = re.compile(r"search min_similarity=(\S+) threshold_used=(\S+) count=(\d+) "
                         r"query=(.*)$")
    parsed = [pattern.search(line).groups() for line in lines[-2:]]
    assert parsed[0] == ("omitted", str(omitted["threshold_used"]), str(omitted["count"]),
                         repr(query))
    assert parsed[1] == ("0.25", "0.25", str(explicit["count"]), repr(query))
    assert all("kg_fuse.server.requests" in line for line in lines[-2:])


def test_a_search_names_the_words_the_corpus_never_uses(http: httpx.Client) -> None:
    """What to rephrase: a query of such words alone lists nothing (familiarity)."""
    body = search(http, "compress data with zyxwvut")
    assert body["unknown_words"] == ["zyxwvut"] and body["results"]
    alone = search(http, "zyxwvut qqqqq")
    assert alone["unknown_words"] == ["zyxwvut", "qqqqq"] and alone["results"] == []
    assert search(http, "compres data")["unknown_words"] == []  # a typo is not unknown


# -- what one search may cost ---------------------------------------------------------------

SEARCH_CPU_SECONDS = 1.0
SEARCH_EXTRA_MEMORY = 100 * MIB
#: Texts that made one search take seconds and gigabytes: every word's typo candidates
#: were made whatever its length, and folding makes text longer (U+3389 is "kcal").
COSTLY_QUERIES = {
    "folded units": "\u3389" * 1_000,
    "one long word": (string.ascii_lowercase * 400)[:9_990],
    "the longest query, folded": "\u3389" * MAX_QUERY_CHARS,
}


def search_cost(kg_server: KGServer, http: httpx.Client, queries: list[str]
                ) -> tuple[float, int]:
    """The server's CPU seconds and extra resident memory for these searches, at once."""
    resident = kg_server.reset_peak_memory()
    cpu = kg_server.cpu_seconds()
    with ThreadPoolExecutor(len(queries)) as pool:
        bodies = list(pool.map(lambda q: search(http, q, min_similarity=0.0), queries))
    assert all(b["count"] >= 0 for b in bodies)
    return kg_server.cpu_seconds() - cpu, kg_server.peak_memory() - resident


@pytest.mark.parametrize("name", list(COSTLY_QUERIES))
def test_no_search_costs_more_than_its_budget(kg_server: KGServer, http: httpx.Client,
                                              name: str) -> None:
    cpu, memory = search_cost(kg_server, http, [COSTLY_QUERIES[name]])
    assert cpu < SEARCH_CPU_SECONDS and memory < SEARCH_EXTRA_MEMORY, (cpu, memory / MIB)


def test_several_costly_searches_at_once_stay_within_their_budgets(
        kg_server: KGServer, http: httpx.Client) -> None:
    queries = [COSTLY_QUERIES["folded units"] + f" {word}" for word in ("tar", "gzip", "csv")]
    queries.append(COSTLY_QUERIES["one long word"] + "x")
    cpu, memory = search_cost(kg_server, http, queries)
    assert cpu < len(queries) * SEARCH_CPU_SECONDS, cpu
    assert memory < len(queries) * SEARCH_EXTRA_MEMORY, memory / MIB
    assert search(http, RELEVANT)["results"][0]["label"] == "gzip.compress"  # still serving
