"""Reading a query in the user's words (no model): word forms, WordNet's bridges, token
shapes, the per-concept familiarity rule and hostile text, over the real WordNet
database the set-up installs and a real SQLite keyword index."""

from __future__ import annotations

import random
import string
import time
import tracemalloc
from pathlib import Path

import pytest

from kg_fuse.limits import MAX_QUERY_CHARS, MIB
from kg_fuse.server.knowledge import indexing
from kg_fuse.server.search import keywords
from kg_fuse.server.search.lexicon import WordNet, find_wordnet, stem, wordnet
from kg_fuse.server.search.understand import UNFAMILIAR_DISCOUNT, read_query, read_word
from kg_fuse.server.search.words import MAX_TERMS, MAX_WORD_CHARS, Vocabulary
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold.calibrate import outliers_for
from kg_fuse.server.threshold.noise import gibberish_queries, not_naming

KITCHEN = Vocabulary.of(names=["ls", "sort", "getcwd"], words=[
    "baking", "bread", "loaf", "pasta", "cooking", "omelette", "eggs", "stock", "chicken",
    "knife", "knives", "sharpening", "compression", "compress", "child", "sort", "list",
    "pathname", "garlic", "sauce", "butter", "ls", "ss", "xxx", "shake", "foo", "cwd",
])


@pytest.fixture(scope="module")
def lexicon() -> WordNet:
    found = wordnet()
    assert found.available, "WordNet's database (Debian's wordnet-base) is not installed"
    return found


def terms(reading_word) -> list[str]:
    return [b.term for b in reading_word.alternatives]


# -- the lexicon ------------------------------------------------------------------------

def test_wordnet_lookups_find_every_entry_by_binary_search(lexicon: WordNet) -> None:
    index = Path(lexicon.root) / "index.noun"
    lines = [ln for ln in index.read_text(encoding="latin-1").splitlines()
             if not ln.startswith("  ")]
    for line in (lines[0], lines[1], lines[len(lines) // 2], lines[-2], lines[-1]):
        lemma = line.split()[0]
        assert lexicon.synsets(lemma, "n"), lemma
    for absent in ("zzzzzz", "aaaaaaaaa", "qwerty", "", "a b"):
        assert lexicon.synsets(absent, "n") == ()


def test_base_forms_know_irregular_words(lexicon: WordNet) -> None:
    assert "child" in lexicon.base_forms("children", "n")
    assert "run" in lexicon.base_forms("ran", "v")
    assert "knife" in lexicon.base_forms("knives", "n")
    assert stem("baking") == stem("bake") and stem("compression") == stem("compress")


def test_without_a_database_only_word_forms_work(tmp_path: Path) -> None:
    empty = WordNet(None)
    assert not empty.available and empty.synsets("spaghetti", "n") == ()
    assert read_word("bake", KITCHEN, empty).kind == "form"
    assert read_word("spaghetti", KITCHEN, empty).kind == "unknown"
    assert find_wordnet() is not None  # the set-up installs it


# -- word forms and meanings ----------------------------------------------------------------

@pytest.mark.parametrize(("word", "form"), [
    ("bake", "baking"), ("compressed", "compression"), ("children", "child"),
    ("loaves", "loaf"), ("sorting", "sort"), ("sharpen", "sharpening"),
])
def test_other_forms_of_a_word_are_the_corpus_s_own(lexicon: WordNet, word: str,
                                                    form: str) -> None:
    reading = read_word(word, KITCHEN, lexicon)
    assert reading.kind == "form" and form in terms(reading)


@pytest.mark.parametrize(("word", "bridge", "via"), [
    ("spaghetti", "pasta", "broader"),   # a spaghetti is a pasta
    ("omelet", "omelette", "synonym"),   # another spelling of the same meaning
    ("broth", "stock", "synonym"),
    ("cleaver", "knife", "broader"),
])
def test_words_the_corpus_never_uses_are_read_through_their_meaning(
        lexicon: WordNet, word: str, bridge: str, via: str) -> None:
    reading = read_word(word, KITCHEN, lexicon)
    assert reading.kind == "meaning"
    found = {b.term: b for b in reading.alternatives}
    assert found[bridge].via == via and 0 < found[bridge].factor < 1.0


def test_only_meanings_people_use_bridge(lexicon: WordNet) -> None:
    """WordNet's sense-tagged texts show which meanings of a word are used: where some
    are, the others (a mountain of paperwork, to pirate a film) do not bridge."""
    assert lexicon.tagged_senses("pirate", "n") >= 1
    assert lexicon.tagged_senses("pirate", "v") == 0
    vocabulary = Vocabulary.of(["copy", "mount", "heap", "stack", "pasta"])
    assert read_word("pirate", vocabulary, lexicon).kind == "english"  # not "copy"
    assert terms(read_word("mountain", vocabulary, lexicon)) == ["mount"]
    # a word the tagged texts never show keeps its meanings, most frequent first
    assert lexicon.tagged_senses("spaghetti", "n") == 0
    assert terms(read_word("spaghetti", vocabulary, lexicon)) == ["pasta"]


def test_a_query_says_what_its_words_were_read_as(lexicon: WordNet) -> None:
    reading = read_query("bake a loaf of spaghetti", KITCHEN, lexicon)
    assert [w.word for w in reading.words] == ["bake", "loaf", "spaghetti"]
    assert reading.expansions()["bake"] == ["baking"]
    assert "pasta" in reading.expansions()["spaghetti"]
    assert "loaf" not in reading.expansions()  # the corpus's own word
    # a short query is embedded with what its unfamiliar words mean; a long one gives
    # the model its own context
    alone = read_query("spaghetti", KITCHEN, lexicon)
    assert alone.embedded_text("spaghetti").startswith("spaghetti (pasta")
    assert reading.embedded_text("x") == "x"
    assert read_query("loaf", KITCHEN, lexicon).embedded_text("loaf") == "loaf"


def test_words_read_as_shows_only_readings_a_person_would_accept(lexicon: WordNet) -> None:
    corpus = Vocabulary.of(words=["good", "goods", "cake", "pasta", "sauce", "tomato",
                                  "dish", "food", "crowded", "flowers", "vegetable"])
    # bread is a baked good: "goods" reaches the corpus's "good" only by its stem
    bread = read_word("bread", Vocabulary.of(words=["good"]), lexicon)
    assert "good" in terms(bread)  # the search still weighs it...
    assert "bread" not in read_query("bread", Vocabulary.of(words=["good"]),
                                     lexicon).expansions()  # ...nobody is shown it
    reading = read_query("spaghetti cupcakes cauliflower", corpus, lexicon)
    shown = reading.expansions()
    assert shown["spaghetti"][0] == "pasta" and "food" not in shown["spaghetti"]
    assert "good" not in shown.get("cupcakes", [])  # "baked goods", two classes up
    assert "crowded" not in shown.get("cauliflower", [])  # a word of its definition
    assert any("crowded" in terms(w) for w in reading.words)  # read, not shown


def test_spelling_alone_is_not_meaning(lexicon: WordNet) -> None:
    # qwerty, asdfgh: no English word, no corpus word; a short non-word is never corrected
    for word in ("qwerty", "asdfgh", "xkcdq", "shak"):
        assert read_word(word, KITCHEN, lexicon).kind == "unknown", word
    # a typo of a corpus word (five letters or more, not itself English) counts half
    assert read_word("pathnme", KITCHEN, lexicon).kind == "typo"
    # an abbreviation WordNet spells in capitals is not the word's meaning (NIH: an agency)
    assert read_word("nih", KITCHEN, lexicon).kind in ("english", "unknown")


def test_a_long_identifier_s_typo_is_still_corrected(lexicon: WordNet) -> None:
    vocabulary = KITCHEN.with_words(["interpolationmissingoptionerror"])  # configparser
    word = read_word("interpolationmisingoptionerror", vocabulary, lexicon)
    assert word.kind == "typo" and terms(word) == ["interpolationmissingoptionerror"]


def _letters(count: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(count))


#: Queries whose reading once took seconds and gigabytes (typo candidates of a word of
#: any length; folding makes text longer: U+3389 is "kcal", U+FDFA 18 characters), and
#: the most a query can ask under the caps: MAX_TERMS words just short enough for typos.
COSTLY_QUERIES = ["\u3389" * 1_000, _letters(9_990, 1), "\u3389" * MAX_QUERY_CHARS,
                  "\ufdfa" * MAX_QUERY_CHARS,
                  " ".join(_letters(40, seed) for seed in range(MAX_TERMS))]


@pytest.mark.parametrize("query", COSTLY_QUERIES, ids=lambda q: f"{q[:3]!r}x{len(q)}")
def test_reading_any_query_costs_little(lexicon: WordNet, query: str) -> None:
    vocabulary = KITCHEN.with_words([_letters(40, 0)[:-1] + "q"])  # a typo away from one
    started = time.process_time()
    reading = read_query(query, vocabulary, lexicon)
    cpu = time.process_time() - started
    tracemalloc.start()  # apart: tracing makes every allocation slower
    try:
        read_query(query, vocabulary, lexicon)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cpu < 1.0 and peak < 100 * MIB, (cpu, peak / MIB)
    assert all(len(w.word) <= MAX_WORD_CHARS for w in reading.words)


def test_token_shapes_count_only_in_names(lexicon: WordNet) -> None:
    assert read_word("ls", KITCHEN, lexicon).kind == "name"
    assert read_word("xxx", KITCHEN, lexicon).alternatives == ()  # in no name
    assert read_word("ss", KITCHEN, lexicon).alternatives == ()   # -ss: an option letter
    assert [b.term for b in read_word("cwd", KITCHEN, lexicon).alternatives] == ["getcwd"]
    assert read_word("foo", KITCHEN, lexicon).alternatives == ()
    assert read_word("zz", KITCHEN, lexicon).kind == "unknown"
    assert read_word("oop", KITCHEN, lexicon).kind == "unknown"  # too short for a form


# -- familiarity: the corpus's own words count everywhere, bridges only where they occur --

def test_familiarity_follows_the_evidence_at_each_concept(lexicon: WordNet) -> None:
    d = UNFAMILIAR_DISCOUNT
    assert read_query("sort a list", KITCHEN, lexicon).familiarity() == 1.0
    spaghetti = read_query("spaghetti", KITCHEN, lexicon)
    best = max(b.factor for b in spaghetti.words[0].alternatives)
    assert spaghetti.familiarity() == pytest.approx(1 - d * (1 - best))
    assert spaghetti.familiarity({0: 0.6}) == pytest.approx(1 - d * 0.4)
    assert spaghetti.familiarity({}) == 0.0  # its meaning is not at this concept
    # a word whose meaning is elsewhere speaks against a concept: noise there, unless
    # the query has one of the corpus's own words, which only discounts it
    assert read_query("spaghetti omelet", KITCHEN, lexicon).familiarity({}) == 0.0
    assert read_query("spaghetti omelet", KITCHEN, lexicon).familiarity({1: 0.8}) == 0.0
    assert read_query("spaghetti knife", KITCHEN, lexicon).familiarity({}) == \
        pytest.approx(1 - d / 2)
    # a non-word beside a corpus word only discounts; alone, or mostly, it is noise
    assert read_query("sort qwerty", KITCHEN, lexicon).familiarity({}) > 0.5
    for noise in ("qwerty", "xkcdq zzyzx", "12345", "= :() 87&>6[<8", "dib dab dob", ""):
        reading = read_query(noise, KITCHEN, lexicon)
        assert reading.familiarity({}) == 0.0, noise
    # a short token counts where a name holds it, and speaks against every other concept
    assert read_query("-ss", KITCHEN, lexicon).familiarity() == 0.0  # in no name
    assert read_query("ls", KITCHEN, lexicon).familiarity({}) == 0.0
    assert read_query("ls", KITCHEN, lexicon).familiarity({0: 1.0}) == 1.0
    assert read_query("--foo", KITCHEN, lexicon).familiarity() == 0.0  # a placeholder
    assert read_query("cwd", KITCHEN, lexicon).familiarity({0: 1.0}) == 1.0  # getcwd
    assert read_query("anything", Vocabulary(), lexicon).familiarity() == 1.0  # no corpus


def test_a_query_that_only_repeats_its_words_is_noise(lexicon: WordNet) -> None:
    for chant, words in (("pasta pasta pasta", ["pasta"]), ("Pasta, PASTA!", ["pasta"]),
                         ("knife sharpening knife sharpening", ["knife", "sharpening"]),
                         ("the pasta of the pasta", ["pasta"])):
        reading = read_query(chant, KITCHEN, lexicon)
        assert list(reading.repeated) == words, chant
        assert reading.familiarity() == 0.0, chant
    for query in ("pasta", "pasta pasta sauce", "of the pasta", "pasta 12 12"):
        reading = read_query(query, KITCHEN, lexicon)
        assert reading.repeated == () and reading.familiarity() > 0.5, query


def test_unknown_words_are_those_with_no_bridge(lexicon: WordNet) -> None:
    reading = read_query("why bake the qwerty spaghetti QWERTY", KITCHEN, lexicon)
    assert reading.unknown_words() == ["qwerty"]  # once; bake and spaghetti were read
    assert read_query("12345 !!!", KITCHEN, lexicon).unknown_words() == []


@pytest.mark.parametrize("hostile", [
    "", " ", '"', "NEAR(sort list)", "name : sort", "-sort", "\x00bake", "𝔰𝔬𝔯𝔱",
    "Bäking", "列表 排序", "\u202espaghetti", "'; DROP TABLE concepts; --", "a" * 10_000,
    " ".join(["spaghetti"] * 500), " ".join(f"w{i}x" for i in range(1000)),
    "_".join(["foo", "bar", "baz"]), "ab-cd-ef", "--xvf -ss", "../../etc/passwd",
])
def test_hostile_text_is_read_as_words_only(lexicon: WordNet, hostile: str) -> None:
    reading = read_query(hostile, KITCHEN, lexicon)
    assert len(reading.words) <= 2 * MAX_TERMS
    assert 0.0 <= reading.familiarity() <= 1.0
    assert isinstance(reading.embedded_text(hostile), str)
    assert read_query("Bäked", KITCHEN, lexicon).words[0].kind == "form"


# -- the keyword side and the calibration --------------------------------------------------

@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "kg.sqlite3")
    rows = [("c_pasta", "Cooking pasta", "Boil the pasta in salted water."),
            ("c_bread", "Storing bread", "Keep a loaf of bread in a paper bag."),
            ("c_ls", "ls", "List directory contents; -ss sorts, xxx is a placeholder.")]
    rows += [(f"c_{i}", f"filler {i}", f"Other text number {i}.") for i in range(30)]
    with store.transaction() as conn:
        conn.executemany("INSERT INTO concepts(id, label, description, created_at) "
                         "VALUES (?, ?, ?, 0)", rows)
    indexing.index_missing_text(store)
    return store


def match(store: Store, query: str, lexicon: WordNet) -> keywords.KeywordMatch:
    reading = read_query(query, keywords.load_vocabulary(store), lexicon)
    return keywords.keyword_scores(store, reading, store.concept_count())


def test_a_bridge_finds_its_concept_below_the_word_s_own_weight(store: Store,
                                                                 lexicon: WordNet) -> None:
    bridged = match(store, "spaghetti", lexicon)
    assert max(bridged.scores, key=bridged.scores.get) == "c_pasta"
    assert bridged.bridged["c_pasta"] == {0: pytest.approx(0.6)}
    assert bridged.scores["c_pasta"] < match(store, "pasta", lexicon).scores["c_pasta"]
    assert "c_pasta" in match(store, "boiling", lexicon).scores  # a form


def test_token_shapes_match_names_only(store: Store, lexicon: WordNet) -> None:
    assert set(match(store, "ls", lexicon).bridged) == {"c_ls"}
    assert match(store, "xxx", lexicon).bridged == {}  # in the text, in no name
    assert match(store, "-ss", lexicon).bridged == {}


def test_calibration_measures_the_token_shapes_that_corpora_contain() -> None:
    noise = gibberish_queries()
    shapes = {s for s, _ in noise}
    assert {"option letters", "placeholders", "joined runs", "everyday nonsense",
            "repeated words"} <= shapes
    chants = [q.split() for s, q in noise if s == "repeated words"]
    assert chants and all(len(c) >= 2 and len(set(c)) == 1 for c in chants)
    options = [q for s, q in noise if s == "option letters"]
    assert all(w.startswith("-") for q in options for w in q.split())
    assert any(len(set(q.replace(" ", ""))) == 1 for s, q in noise if s == "placeholders")
    assert any("_" in q or "-" in q for s, q in noise if s == "joined runs")
    # a random option letter that names a concept is a query for it, not noise
    kept = not_naming([("option letters", "-re"), ("option letters", "-qz"),
                       ("placeholders", "xxx")], ["re", "re.compile", "xxx handler"])
    assert kept == [("option letters", "-qz")]


def test_a_small_corpus_leaves_one_outlier_out_of_the_floor() -> None:
    assert outliers_for(67) == outliers_for(319) == 1
    assert outliers_for(1000) == outliers_for(6910) == 2
