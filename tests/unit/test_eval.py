"""``kg-fuse eval``: query sets, the summary arithmetic, the text table, the CLI errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kg_fuse.cli import main
from kg_fuse.eval import sets
from kg_fuse.eval.report import Distribution, format_text, percentile, summary, to_json
from kg_fuse.eval.runner import EvalRun, GibberishResult, RelevantResult
from kg_fuse.server.corpus.markdown import read_folder


def test_shipped_sets_have_the_promised_size_and_shapes() -> None:
    assert set(sets.builtin_names()) >= {"stdlib", "kitchen"}
    stdlib = sets.load("stdlib")
    kitchen = sets.load("kitchen")
    assert len(stdlib.relevant) >= 80 and len(kitchen.relevant) >= 30
    assert len(stdlib.gibberish) >= 50 and kitchen.gibberish == stdlib.gibberish
    lengths = {len(q.split()) for q in stdlib.gibberish}
    assert 1 in lengths and max(lengths) >= 7  # single tokens through long nonsense
    assert any(not any(c.isalpha() for c in q) for q in stdlib.gibberish)  # digits/punct
    texts = {q.text: q.expect for q in stdlib.relevant}
    assert "list.sort" in texts["sort a list"] and "math.sqrt" in texts[
        "square root of a number"]


@pytest.mark.parametrize("name", ["kitchen", "kitchen-words", "kitchen-home",
                                  "kitchen-home-heldout"])
def test_kitchen_expectations_name_real_sections(name: str) -> None:
    labels = {c.label for d in read_folder(sets.CORPORA_DIR / "kitchen") for c in d.concepts}
    assert 30 <= len(labels) <= 80
    for query in sets.load(name).relevant:
        assert set(query.expect) <= labels, query.text


def test_everyday_sets_are_short_queries_with_a_held_out_half() -> None:
    for name in ("stdlib-everyday", "kitchen-home", "manpages-everyday"):
        dev, held = sets.load(name), sets.load(f"{name}-heldout")
        assert len(dev.relevant) >= 20 and len(held.relevant) >= 20
        texts = [q.text for q in dev.relevant + held.relevant]
        assert len(set(texts)) == len(texts)  # no query in both halves
        assert all(1 <= len(t.split()) <= 3 for t in texts)
    total = sum(len(sets.load(n).relevant) for n in ("stdlib-everyday",
                                                      "stdlib-everyday-heldout"))
    assert total >= 60
    shared = sets.load("stdlib").gibberish
    for token_shaped in ("-ss", "xxx", "foo_bar_baz", "ab-cd-ef", "purple tuesday ladder"):
        assert token_shaped in shared


def test_question_sets_are_new_queries_with_a_held_out_half_and_more_noise() -> None:
    dev, held = sets.load("stdlib-questions"), sets.load("stdlib-questions-heldout")
    assert len(dev.relevant) >= 25 and len(held.relevant) >= 25
    texts = [q.text for q in dev.relevant + held.relevant]
    assert len(set(texts)) == len(texts)
    earlier = {q.text for name in ("stdlib", "heldout", "stdlib-everyday",
                                   "stdlib-everyday-heldout")
               for q in sets.load(name).relevant}
    assert not earlier & set(texts)  # a new sitting, not a copy of the earlier sets
    more = set(dev.gibberish) - set(sets.load("stdlib").gibberish)
    assert len(more) >= 25 and {"日本語", "😀😀", "the of and"} <= more


def test_a_set_file_by_path_and_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('gibberish = ["zzz"]\n[[query]]\ntext = "gzip"\nexpect = ["gzip.open"]\n')
    mine = sets.load(str(path))
    assert (mine.name, mine.gibberish, mine.relevant[0].expect) == ("mine", ["zzz"],
                                                                    ("gzip.open",))
    with pytest.raises(sets.QuerySetError, match="no query set 'nope'"):
        sets.load("nope")
    path.write_text('[[query]]\ntext = "x"\nexpect = "not a list"\n')
    with pytest.raises(sets.QuerySetError, match="list of non-empty strings"):
        sets.load(str(path))


def test_percentile_and_distribution() -> None:
    assert percentile([1.0], 90) == 1.0
    assert percentile([0.0, 1.0], 90) == pytest.approx(0.9)
    assert percentile([0.1, 0.2, 0.3, 0.4, 0.5], 50) == pytest.approx(0.3)
    dist = Distribution.of([0.5, 0.1, 0.3])
    assert (dist.n, dist.median, dist.max, dist.min) == (3, 0.3, 0.5, 0.1)
    assert Distribution.of([]).median is None


def _run() -> EvalRun:
    qset = sets.QuerySet(name="t")
    gib = [GibberishResult("zzz", 0.30, "a", 0, 0.5),
           GibberishResult("qqq", 0.55, "b", 2, 0.5)]
    rel = [RelevantResult("sort a list", ("list.sort",), 0.7, "list.sort", 1, 0.7,
                          "list.sort", 3, 1, 0.5),
           RelevantResult("square root", ("math.sqrt",), 0.45, "math.sqrt", 4, 0.6,
                          "cmath.sqrt", 1, None, 0.5),
           RelevantResult("lost", ("nowhere",), None, None, None, 0.2, "x", 0, None, 0.5)]
    return EvalRun(qset, "http://127.0.0.1:1", 50, gib, rel)


def test_summary_counts_what_the_default_listing_shows() -> None:
    s = summary(_run())
    assert s["default_threshold"] == 0.5
    assert (s["gibberish_listing_anything"], s["gibberish_listing_anything_pct"]) == (1, 50.0)
    assert (s["relevant_listed"], s["relevant_listed_pct"]) == (1, 33.3)
    assert s["relevant_not_found"] == 1
    assert s["relevant_above_gibberish_max"] == 1  # 0.7 > 0.55; 0.45 is not
    assert s["gibberish"]["max"] == 0.55 and s["relevant"]["min"] == 0.45


def test_text_and_json_name_every_miss() -> None:
    run = _run()
    text = format_text(run)
    assert "gibberish queries that list anything: 1/2 (50.0%)" in text
    assert "'qqq'" in text and "lists 2" in text
    assert "relevant queries whose expected concept is listed: 1/3 (33.3%)" in text
    assert "math.sqrt 0.450 rank 4; top cmath.sqrt 0.600" in text
    assert "none of nowhere in the top results" in text
    data = json.loads(to_json(run))
    assert [r["hit"] for r in data["relevant"]] == [True, False, False]
    assert data["summary"]["relevant_listed"] == 1


def test_plot_without_matplotlib_is_a_clear_error(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["eval", "--plot", "out.png"]) == 2
    assert "-m pip install '.[plot]'" in capsys.readouterr().err


def test_unknown_set_is_a_clear_error(capsys) -> None:
    assert main(["eval", "--set", "no-such-set"]) == 2
    err = capsys.readouterr().err
    assert "no query set 'no-such-set'" in err
    assert err.count("stdlib-everyday,") == 1  # the sets named once, in the hint


def test_judged_sets_mark_every_file_of_a_listing_with_a_held_out_half() -> None:
    total = 0
    for corpus in ("stdlib", "kitchen", "manpages"):
        dev, held = sets.load(f"judged-{corpus}"), sets.load(f"judged-{corpus}-heldout")
        texts = [q.text for q in dev.relevant + held.relevant]
        assert len(set(texts)) == len(texts) and len(held.relevant) >= 10
        for query in dev.relevant + held.relevant:
            assert not set(query.relevant) & set(query.irrelevant), query.text
        # a query whose listing was empty has nothing to judge
        assert sum(q.judged for q in dev.relevant + held.relevant) >= 0.85 * len(texts)
        total += len(texts)
    assert total >= 60


def test_precision_and_recall_against_the_judgments() -> None:
    judged = [RelevantResult("a", ("x",), 0.7, "x", 1, 0.7, "x", 3, 1, 0.5,
                             listed_labels=("x", "y", "z"), judged_relevant=("x", "w"),
                             judged_irrelevant=("y", "z")),
              RelevantResult("b", ("p",), 0.7, "p", 1, 0.7, "p", 1, 1, 0.5,
                             listed_labels=("p",), judged_relevant=("p",),
                             judged_irrelevant=("q",)),
              RelevantResult("c", ("n",), None, None, None, 0.1, "n", 0, None, 0.5,
                             judged_relevant=("n",))]
    run = EvalRun(sets.QuerySet(name="t"), "http://127.0.0.1:1", 50, [], judged)
    s = summary(run)
    # precision: (1/3 + 1/1) / 2 listings; recall: (1/2 + 1/1 + 0/1) / 3 queries
    assert s["judged"] == {"queries": 3, "precision": 0.667, "recall": 0.5,
                           "empty_listings": 1, "unjudged_listed": 0}
    assert s["listing_size"]["median"] == 1.0
    assert "precision 0.667, recall 0.500; 1 empty listings" in format_text(run)
    assert summary(_run())["judged"] is None  # a set without judgments
