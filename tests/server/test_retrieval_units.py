"""Retrieval pieces without a model: views and fusion, the hybrid merge, FTS5 keyword
scores on a real SQLite store (hostile text included), the calibration statistic,
provenance and the recalibration rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kg_fuse.server.knowledge import indexing
from kg_fuse.server.search import keywords
from kg_fuse.server.search.index import ConceptIndex, merge
from kg_fuse.server.search.lexicon import wordnet
from kg_fuse.server.search.understand import TYPO_PENALTY, read_query
from kg_fuse.server.search.views import WEIGHTS, fuse, split_name, view_texts
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold.calibrate import (
    RULE,
    CalibrationReport,
    drifted,
    format_report,
    noise_floor,
    probe_queries,
)
from kg_fuse.server.threshold.noise import (
    EVERYDAY_WORDS,
    GLUE_WORDS,
    NOISE_SHAPES,
    gibberish_queries,
)


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


# -- views and fusion -----------------------------------------------------------------

def test_names_are_split_into_words() -> None:
    assert split_name("os.path.join") == "os path join"
    assert split_name("shutil.make_archive") == "shutil make archive"
    assert split_name("tempfile.TemporaryDirectory") == "tempfile Temporary Directory"
    assert split_name("http.HTTPStatus") == "http HTTP Status"


def test_view_texts_fall_back_to_evidence_for_examples() -> None:
    texts = view_texts("list.sort", "Sort the list in place.", signature="(*, key=None)",
                       evidence=["Sort the list in place.", "The sort is stable."])
    assert texts == {"name": "list sort (*, key=None)",
                     "description": "list.sort: Sort the list in place. The sort is stable.",
                     "examples": "The sort is stable."}
    assert view_texts("x", "") == {"name": "x", "description": "x"}


def test_a_one_line_summary_reads_on_into_the_next_paragraph() -> None:
    short = view_texts("enumerate", "Return an enumerate object.",
                       examples="The enumerate object yields pairs of a count and a value. "
                                + "x" * 400)
    assert short["description"].startswith("enumerate: Return an enumerate object. The "
                                           "enumerate object yields pairs")
    assert len(short["description"]) == len("enumerate: Return an enumerate object. ") + 300
    summary = "Return the ceiling of x as an Integral, the smallest integer >= x."
    full = view_texts("math.ceil", summary, examples="More words.")
    assert full["description"] == f"math.ceil: {summary}"  # long enough on its own
    assert view_texts("f", "Do it.")["description"] == "f: Do it."  # nothing to add


def test_an_old_store_keeps_its_vectors_as_the_description_view(tmp_path: Path) -> None:
    import sqlite3
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE concepts (id TEXT PRIMARY KEY, label TEXT NOT NULL, description TEXT "
        "NOT NULL DEFAULT '', search_terms TEXT NOT NULL DEFAULT '[]', created_at REAL);"
        "CREATE TABLE embeddings (concept_id TEXT PRIMARY KEY, model TEXT, vector BLOB);"
        "INSERT INTO concepts(id, label, description, created_at) VALUES ('c1', 'a', 'b', 0);")
    conn.execute("INSERT INTO embeddings VALUES ('c1', 'm', ?)", (unit(1, 0).tobytes(),))
    conn.commit()
    conn.close()
    store = Store(path)
    rows = store.query("SELECT concept_id, view, vector FROM concept_views")
    assert [(r[0], r[1]) for r in rows] == [("c1", "description")]
    assert np.frombuffer(rows[0][2], np.float32).tolist() == unit(1, 0).tolist()
    assert store.query_one("SELECT 1 FROM sqlite_master WHERE name = 'embeddings'") is None


def test_fused_score_is_the_weighted_sum_of_view_cosines() -> None:
    views = {"name": unit(1, 0, 0), "description": unit(0, 1, 0), "examples": unit(1, 1, 0)}
    query = unit(1, 2, 0)
    fused = fuse(views)
    expected = sum(WEIGHTS[v] * float(query @ views[v]) for v in views)
    assert float(query @ fused) == pytest.approx(expected, abs=1e-6)


def test_weights_are_renormalised_over_the_views_a_concept_has() -> None:
    views = {"name": unit(1, 0), "description": unit(0, 1)}
    query = unit(1, 1)
    total = WEIGHTS["name"] + WEIGHTS["description"]
    expected = (WEIGHTS["name"] * float(query @ views["name"]) +
                WEIGHTS["description"] * float(query @ views["description"])) / total
    assert float(query @ fuse(views)) == pytest.approx(expected, abs=1e-6)
    # a concept identical to the query in every view it has scores 1, missing views or not
    assert float(query @ fuse({"name": query})) == pytest.approx(1.0, abs=1e-6)


# -- the hybrid merge -----------------------------------------------------------------

def test_merge_stays_in_unit_interval_and_only_lifts() -> None:
    v = np.array([-0.2, 0.0, 0.3, 0.5, 1.0], np.float32)
    for kw in (0.0, 0.5, 1.0):
        merged = merge(v, np.full_like(v, kw))
        assert np.all(merged >= np.clip(v, 0, 1) - 1e-7) and np.all(merged <= 1.0)
    assert np.allclose(merge(v, 0.0), np.clip(v, 0, 1))
    # a full keyword match closes at most 30% of the distance to 1
    assert float(merge(0.5, 1.0)) == pytest.approx(0.65)


def test_index_search_merges_keyword_scores_and_filters_the_merged_score() -> None:
    index = ConceptIndex.build({"a": unit(1, 0), "b": unit(0.6, 0.8), "c": unit(0, 1)},
                               {"a": frozenset({"o1"}), "b": frozenset({"o1", "o2"}),
                                "c": frozenset({"o2"})})
    q = unit(1, 0)
    assert [c for c, _ in index.search(q, 0.5)] == ["a", "b"]
    boosted = index.search(q, 0.5, keyword={"c": 1.0})
    assert [c for c, _ in boosted] == ["a", "b"]  # 0 + 0.3 * 1 * 1 = 0.3 < 0.5
    lifted = dict(index.search(q, 0.0, keyword={"b": 1.0}))
    assert lifted["b"] == pytest.approx(0.6 + 0.3 * 0.4)
    assert [c for c, _ in index.search(q, 0.0, ontology="o2", keyword={"a": 1.0})] == ["b"]


# Regression test (issue 34): at threshold 0 every concept was listed, "as 0 if need be",
# so nonsense listed a page of concepts scoring 0.0000.
def test_a_score_of_0_is_no_match_even_at_threshold_0() -> None:
    index = ConceptIndex.build({"a": unit(1, 0), "b": unit(0.6, 0.8), "c": unit(0, 1),
                                "d": unit(-1, 0.2)}, {})
    q = unit(1, 0)  # c is orthogonal to it, d points away: neither scores
    for top_k in (None, 1, 10):
        assert [c for c, _ in index.search(q, 0.0, top_k=top_k)] == ["a", "b"][:top_k]
    assert [c for c, _ in index.search(q, 0.0, keyword={"c": 1.0})] == ["a", "b", "c"]
    assert index.search(q * np.float32(0.0), 0.0) == []  # noise: its vector counts for 0
    assert index.search(q * np.float32(0.0), 0.0, keyword={"c": 0.0}) == []


def test_an_empty_index_takes_the_width_of_the_model_that_fills_it() -> None:
    """A server starts with an empty index whatever its model: the first concepts added
    (by an ingest) give it their width, 2 here as 384 or 48 elsewhere."""
    filled = ConceptIndex().changed(added={"a": unit(1, 0), "b": unit(0.6, 0.8)},
                                    members={"a": frozenset({"o"})})
    fresh = ConceptIndex.build({"a": unit(1, 0), "b": unit(0.6, 0.8)}, {"a": frozenset({"o"})})
    assert filled.matrix.shape == (2, 2)
    assert filled.search(unit(1, 0), 0.0) == fresh.search(unit(1, 0), 0.0)
    assert [c for c, _ in filled.search(unit(1, 0), 0.7)] == ["a"]


def test_incremental_changes_match_a_fresh_build() -> None:
    vectors = {c: unit(i + 1, 3 - i) for i, c in enumerate("abc")}
    members = {c: frozenset({"o"}) for c in vectors}
    index = ConceptIndex.build(vectors, members)
    changed = index.changed(added={"d": unit(1, 1)}, removed=["b"],
                            members={"d": frozenset({"p"})})
    expected = {c: v for c, v in vectors.items() if c != "b"} | {"d": unit(1, 1)}
    fresh = ConceptIndex.build(expected, {"a": frozenset({"o"}), "c": frozenset({"o"}),
                                          "d": frozenset({"p"})})
    q = unit(2, 1)
    assert index.search(q, 0.0) != fresh.search(q, 0.0)  # the old index is untouched
    assert [(c, round(s, 6)) for c, s in changed.search(q, 0.0)] == \
        [(c, round(s, 6)) for c, s in fresh.search(q, 0.0)]
    assert [c for c, _ in changed.search(q, 0.0, ontology="p")] == ["d"]
    dropped = changed.changed(dropped_ontology="o")
    assert dropped.search(q, 0.0, ontology="o") == []
    assert len(dropped) == 3


# -- FTS5 keyword scores --------------------------------------------------------------

CONCEPTS = [
    ("c_sort", "list.sort", "Sort the list in place, using only < comparisons."),
    ("c_sorted", "sorted", "Return a new list containing all items from the iterable in "
     "ascending order."),
    ("c_sqrt", "math.sqrt", "Return the square root of x."),
    ("c_join", "os.path.join", "Join two or more pathname components."),
    ("c_near", "NEAR operator", "Quotes \"like these\" and * stars - minus: colon ^ caret."),
]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "kg.sqlite3")
    with store.transaction() as conn:
        conn.executemany("INSERT INTO concepts(id, label, description, created_at) "
                         "VALUES (?, ?, ?, 0)", CONCEPTS)
        for i in range(40):  # filler so IDF is meaningful
            conn.execute("INSERT INTO concepts(id, label, description, created_at) "
                         "VALUES (?, ?, ?, 0)", (f"c_fill{i}", f"mod.func{i}",
                                                 f"Do thing number {i} with the value."))
    assert indexing.index_missing_text(store) == len(CONCEPTS) + 40
    return store


def scores(store: Store, query: str) -> dict[str, float]:
    reading = read_query(query, keywords.load_vocabulary(store), wordnet())
    return keywords.keyword_scores(store, reading, store.concept_count()).scores


def test_keyword_scores_are_normalised_and_prefer_full_matches(store: Store) -> None:
    result = scores(store, "sort a list")
    assert set(result) >= {"c_sort", "c_sorted"}
    assert all(0.0 < s <= 1.0 for s in result.values())
    assert max(result, key=result.get) == "c_sort"
    assert result["c_sort"] == pytest.approx(1.0)


def test_unknown_tokens_pull_the_keyword_score_down(store: Store) -> None:
    alone = scores(store, "sqrt")["c_sqrt"]
    diluted = scores(store, "sqrt blorfquux zimzam")["c_sqrt"]
    assert alone == pytest.approx(1.0) and diluted < 0.5
    assert scores(store, "asdfgh qwerty zxcvb") == {}


def test_typos_match_at_half_weight_only_for_long_tokens(store: Store) -> None:
    assert 0.2 < scores(store, "pathnme")["c_join"] <= TYPO_PENALTY
    assert scores(store, "sqrr") == {}  # four letters: never corrected


def test_common_words_carry_no_keyword_weight(store: Store) -> None:
    assert scores(store, "the with value") == {}


def test_numbers_alone_get_no_keyword_score_but_count_beside_words(store: Store) -> None:
    assert scores(store, "12 12 12") == {} and scores(store, "12 + 7!") == {}
    assert max(scores(store, "thing 12").items(), key=lambda kv: kv[1])[0] == "c_fill12"


@pytest.mark.parametrize("hostile", [
    '"', '""', '" OR 1', "NEAR(sort list)", "sort*", "-sort", "name:sort", "^sort",
    "(sort", "sort)", "AND", "OR NOT", "'; DROP TABLE concepts; --", "sort NEAR/2 list",
    "\x00sort", "𝔰𝔬𝔯𝔱", "Sörted", "列表 排序", "\u202esort", "*", ":", "{name}: sort",
])
def test_hostile_text_is_only_text(store: Store, hostile: str) -> None:
    result = scores(store, hostile)
    assert all(0.0 <= s <= 1.0 for s in result.values())
    assert store.concept_count() == len(CONCEPTS) + 40


def test_operators_are_searched_as_words(store: Store) -> None:
    assert "c_near" in scores(store, "NEAR")
    assert "c_sorted" in scores(store, "Sörted")  # diacritics folded as FTS5 does
    assert keywords.quote('a"b') == '"a""b"'


def test_deleting_a_concept_deletes_its_text(store: Store) -> None:
    with store.transaction() as conn:
        conn.execute("DELETE FROM concepts WHERE id = 'c_sqrt'")
    assert "c_sqrt" not in scores(store, "square root")


def test_the_term_cache_gives_the_same_scores_without_touching_sqlite(store: Store) -> None:
    cache = keywords.TermCache()
    queries = ["sort a list", "pathnme", "square root sqrt", "blorf", "NEAR(sort list)"]
    vocab = keywords.load_vocabulary(store)
    readings = [read_query(q, vocab, wordnet()) for q in queries]
    total = store.concept_count()
    fresh = [keywords.keyword_scores(store, r, total) for r in readings]
    first = [keywords.keyword_scores(store, r, total, cache=cache) for r in readings]
    assert first == fresh
    statements: list[str] = []
    with store.locked() as conn:  # every statement the store runs meanwhile, traced
        conn.set_trace_callback(statements.append)
        try:
            again = [keywords.keyword_scores(store, r, total, cache=cache) for r in readings]
        finally:
            conn.set_trace_callback(None)
    assert again == fresh and statements == []


# -- calibration ----------------------------------------------------------------------

def test_noise_covers_every_shape_and_is_seeded() -> None:
    noise = gibberish_queries()
    assert noise == gibberish_queries()
    shapes = {s for s, _ in noise}
    assert shapes == set(NOISE_SHAPES)
    assert ("keyboard mashes", "asdfgh qwerty zxcvb") in noise
    short = [q for s, q in noise if s == "short tokens"]
    assert all(3 <= len(w) <= 5 for q in short for w in q.split())
    assert any(not any(c.isalpha() for c in q) for s, q in noise
               if s == "digits and punctuation")
    everyday = [q.split() for s, q in noise if s == "everyday nonsense"]
    assert len(everyday) > 30  # sampled more: real words vary more in score
    assert all(4 <= len(words) <= 8 and set(words) <= set(EVERYDAY_WORDS) | set(GLUE_WORDS)
               for words in everyday)


def test_one_junk_concept_cannot_drag_the_floor() -> None:
    clean = [[(f"c{i}", 0.30 + i / 1000)] for i in range(50)]
    floor, outliers, _ = noise_floor(clean)
    junk = clean + [[("junk", 0.55), ("c1", 0.31)], [("junk", 0.52)]]
    junk_floor, junk_outliers, _ = noise_floor(junk)
    assert "junk" in junk_outliers
    assert junk_floor == pytest.approx(floor, abs=0.002)


def test_probes_come_from_the_corpus_without_naming_the_concept() -> None:
    probes = probe_queries([("c1", "gzip.compress", "Compress data in one shot and "
                             "return the compressed bytes."), ("c2", "x", "Too short.")])
    assert probes == [("c1", "data in one shot and return the compressed")]


def test_recalibration_rule() -> None:
    assert not drifted(1000, 1200) and drifted(1000, 1201) and drifted(1000, 799)
    assert drifted(0, 5) and not drifted(0, 0)


def test_format_report_prints_the_table() -> None:
    report = CalibrationReport(
        concept_count=1234, gibberish_count=283, gibberish_median=0.2712,
        gibberish_max=0.4531, gibberish_worst_query="abc def", noise_floor=0.44,
        outliers=["lzma"], shapes=[("short tokens", 40, 0.25, 0.41)],
        probes=[("data in one shot", 0.878, "gzip.compress")], probes_found=1,
        default=0.46, calibrated_at="2026-01-01T00:00:00+00:00")
    text = format_report(report, "some-model")
    assert text.startswith("Calibration over 1234 concepts (some-model, ")
    assert "short tokens" in text and "0.410" in text
    assert "concepts left out of the floor: lzma" in text
    assert "probes listing their concept at the default: 1/1" in text
    assert f"rule: {RULE}" in text and "default: 0.46" in text
