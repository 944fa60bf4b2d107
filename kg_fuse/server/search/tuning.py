"""Every tuned number of the search, in one table: its value, what it is for, and which
evaluation figure chose it.

The modules of :mod:`kg_fuse.server.search` and :mod:`kg_fuse.server.threshold` read
their numbers from here (most keep their old constant name as an alias, so
``understand.TYPO_PENALTY`` is this table's ``TYPO_PENALTY.value``; the searcher reads
the near-miss entries directly). The figures named are those docs/eval.md and docs/server.md
record, round by round; where none was recorded the entry says so ("not measured: set
by hand"). Change a value only with ``kg-fuse eval`` figures from before and after,
and write them into ``chosen_by``: ``scripts/sweep_tuning.py STORE --set NAME ...
ENTRY=V1,V2`` prints them for any entry, each value against the shipped one.
``python -m kg_fuse.server.search.tuning`` prints the table.

Every number here that is a score (the keyword lift, the familiarity discount, the
presets' steps, the noise margin, the near-miss floor, and the mount's cut gap in
:mod:`kg_fuse.listing.cut`) holds for any sentence model, because no model's raw
cosines reach them: the search maps each model's cosines onto all-MiniLM-L6-v2's scale
first (:mod:`kg_fuse.server.store_model.scale`, ``SCORE_SCALE_REFERENCE``), by a line
measured for the model, and the default is calibrated on the mapped scores. The figures
below were measured with that model, on which the map is the identity. What a scale
cannot carry over, how far keywords should lift a stronger model's scores, a model's row
of ``BY_MODEL`` moves, measured for that model; the searcher reads it through
:func:`for_model`.

Not here, because they bound cost or guard against hostile input rather than trade
relevance against noise: the query's word count and word length
(``words.MAX_TERMS``, ``MAX_WORD_CHARS``), the typo range of 5 to 40 letters
(``understand.TYPO_MIN_CHARS``, ``TYPO_MAX_CHARS``), cache sizes
(``keywords.CACHED_TERMS``, ``searcher.PREPARED_QUERIES``, ``lexicon.CACHED_STEMS``),
the scan's block size and rounding margin (:mod:`.scan`), the acronym reader's text
windows (120 and 200 characters), request size caps (:mod:`kg_fuse.limits`). Nor the shapes of the
calibration's noise (how many letters a random token has: they define each shape,
described in docs/server.md, and live with their generators in
:mod:`kg_fuse.server.threshold.noise`), nor the halving in the presets' rule ("halfway
towards ..."), which is the rule's form. The ingest's own numbers (three SIMILAR_TO
neighbours, the 0.92 near-duplicate warning) are not the search's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from kg_fuse.listing.presets import PRESET_OFFSETS
from kg_fuse.server.store_model import pairs

T = TypeVar("T")


@dataclass(frozen=True)
class Tuned(Generic[T]):
    """One tuned number (or a small mapping of them)."""

    value: T
    purpose: str
    chosen_by: str


# -- the final score: vectors, views and keywords (index.py, views.py, keywords.py) ------

KEYWORD_WEIGHT = Tuned(
    0.3, "how much a full keyword match lifts a score: v + w * kw * (1 - v)",
    "eval, second round: 0.3 listed 126/136 stdlib with 0/59 gibberish; 0.2 let "
    "gibberish list (stdlib 1/59, heldout 1/81); 0.4 and 0.5 listed 120 and 105/136")
VIEW_WEIGHTS = Tuned(
    {"name": 0.0, "description": 1.0, "examples": 0.0},
    "the fused vector's weight of each view of a concept (only weighted views are "
    "embedded)",
    "eval on the full stdlib (docs/server.md, fused views): label + description alone "
    "with keywords 110/136, fused 0.2/0.6/0.2 with keywords 105/136, fused without "
    "keywords 94/136")
EXAMPLES_CHARS = Tuned(
    400, "the examples view's text is cut here (one long docstring cannot dominate "
    "the build)",
    "not measured: build-time (the sweep does not rebuild the store); the examples "
    "view has weight 0, so only ELABORATION_CHARS of it is read")
SHORT_SUMMARY_WORDS = Tuned(
    5, "a first paragraph of at most this many words reads on into the next ones in "
    "the description view",
    "eval, third round: 5 words or fewer found `enumerate` (130/136, with margin 0.03); "
    "under 10 words lost `bytes.decode` and `combinations` (129/136)")
ELABORATION_CHARS = Tuned(
    300, "how much of the following text such a short summary reads on into",
    "not measured: build-time (changing it means re-embedding the corpus)")
KEYWORD_PER_TERM = Tuned(
    200, "keyword candidates fetched per query term (bm25 top rows)",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 100 and 400 within a query of 200 on every set (held-out recall +1.0 "
    "and +0.3 points, development +0.1)")
COMMON_FRACTION = Tuned(
    0.1, "a term in more than this share of concepts carries no keyword weight",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 0.05 development +0.1, held-out +0.3 points, judged precision +0.013; "
    "0.2 development -0.8: within a query or two, kept")
BM25_WEIGHTS = Tuned(
    (0.0, 4.0, 1.0, 2.0, 1.0), "bm25() column weights: concept id, name, signature, "
    "description, examples",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): name and description weights 2/2 held-out +0.3 points, 4/4 "
    "development +0.3 and held-out -0.2: within a query, kept")

SCORE_SCALE_REFERENCE = Tuned(
    (pairs.UNRELATED_REF, pairs.RELATED_REF), "all-MiniLM-L6-v2's mean cosine of unrelated "
    "and of related query/passage pairs (store_model/pairs.py): every model's cosines are "
    "mapped onto this scale, so every other score in this table holds for any model",
    "not tuned: measured (the pairs of store_model/pairs.py embedded by all-MiniLM-L6-v2 "
    "0.1.0 on ONNX Runtime: 0.029327 and 0.555873), and rounded so that model maps to "
    "itself exactly")
SCORE_SCALE_LEAST_SPREAD = Tuned(
    pairs.LEAST_SPREAD, "a model that scores related pairs less than this above unrelated ones is "
    "stretched no further (it cannot rank; its noise is not amplified without bound)",
    "not tuned: a guard for broken models (random weights spread ~0.001); the "
    "reference's spread is 0.53")

# -- reading the query (understand.py, bridges.py, words.py) -----------------------------

TYPO_PENALTY = Tuned(
    0.5, "a typo's unfamiliarity, and the share of the word its correction carries",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 0.3 and 0.7 give the same figures on all 19 sets (their queries hold "
    "no typo the corpus could correct)")
UNFAMILIAR_DISCOUNT = Tuned(
    0.4, "how much of the vector score a query loses as its words grow unfamiliar: "
    "1 - d * mean unfamiliarity",
    "eval, second round: 0.3 let `xkcdq` list (1/59); 0.4 0/59 and 125/136; 0.5 124/136. "
    "Third round: 0.5 again lost a kitchen query (60/61). Fourth round: 0.5 and 0.6 "
    "lowered the defaults and gained nothing")
MISSING_WEIGHT = Tuned(
    {"meaning": 1.0, "name": 1.0, "unknown": 0.5, "english": 0.4},
    "what a word weighs against a concept it has no evidence at, by reading; where the "
    "words against outweigh those for, the query is noise there",
    "eval, fourth round: weighing words for and against a concept was kept over a rule "
    "by the share of unknown words (which lost `cornmeal porridge`); the weights "
    "themselves not measured: set by hand")
SUPPORT = Tuned(
    {"corpus": 1.0, "form": 1.0, "typo": 0.5, "name": 1.0},
    "what a word weighs for a concept, by reading (a meaning: its bridge's factor)",
    "as MISSING_WEIGHT: the rule chosen in the fourth round, the weights set by hand")
BRIDGE_FACTORS = Tuned(
    {"synonym": 0.8, "broader": 0.6, "related": 0.6, "broader2": 0.4, "gloss": 0.45},
    "the share of a word a WordNet bridge carries, by relation (the order breaks ties)",
    "eval, fourth round: WordNet's meanings took kitchen-words from 10 to 22/30 and "
    "gibberish listing from 4/1/5 to 0/0/2 (stdlib/kitchen/man); the factors themselves "
    "not measured: set by hand. Fifth round: weighting a broader term by its own number "
    "of meanings lowered the defaults (man 0.22 to 0.17), dropped")
MULTIWORD_FACTOR = Tuned(
    0.75, "a word out of a multi-word WordNet name (\"loaf of bread\" -> bread) carries "
    "this much of its bridge",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 0.5 and 1.0 give the same recall and precision; gibberish listing in "
    "16 and 18 queries against 17 (the question sets' single words)")
SENSES = Tuned(3, "meanings read per part of speech, most frequent first",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 2 and 5 give the same figures on all 19 sets")
SENSE_DECAY = Tuned(
    0.85, "each less frequent meaning's bridges count this much less",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 0.7 gives the same figures; 1.0 lets one more gibberish query list "
    "(18 against 17)")
MAX_BRIDGES = Tuned(6, "corpus words kept per query word",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 4 loses a kitchen-words query (development -0.3) and moves the manual "
    "pages' default 0.22 -> 0.19; 10 gives the same figures")
GLOSS_MAX_SENSES = Tuned(
    5, "a definition's word bridges only when it has at most this many meanings (a "
    "specific thing or action)",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 3 loses two kitchen-words queries (development -0.6); 8 loses a "
    "held-out query (-0.6) and lets 2 more gibberish queries list")
EMBEDDED_BRIDGES = Tuned(
    2, "bridges (synonyms, broader terms) added to the embedded text of a word read "
    "through its meaning: `spaghetti (pasta, dish)`",
    "eval, fourth round: embedding the meanings took kitchen-words from 22 to 26/30 and "
    "the man pages' default from 0.14 to 0.22 (gibberish 2 to 0), at one stdlib-everyday "
    "query in each half; the count 2 not measured: set by hand")
EMBED_BRIDGES_UP_TO = Tuned(
    2, "queries of at most this many words are embedded with their bridges (a longer "
    "query gives the model its own context)", "as EMBEDDED_BRIDGES")
SHOWN_MIN_FACTOR = Tuned(
    0.4, "the weakest bridge `words read as` shows (display only: the search weighs all)",
    "chosen by reading every reading of the everyday sets' words: below 0.4 only distant "
    "classes remain (`spaghetti -> food`); no eval figure")
MIN_WORD_CHARS = Tuned(
    3, "shorter words are not looked up in WordNet (ss, xx, a)",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, 16 noise samples): "
    "2 gives the same figures; 4 the same recall, the kitchen's and manual pages' "
    "defaults 0.20 and 0.17 and gibberish in 14 queries against 17 (with one sample 4 "
    "dropped the manual pages' default to 0.13 and let 4 gibberish queries a set list)")
MIN_FORM_CHARS = Tuned(
    4, "shorter words have no other forms (oop is not oops)",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, 16 noise samples): "
    "3 gives the same figures, 5 the same recall and gibberish (with one sample 5 "
    "dropped the stdlib default to 0.25 and let gibberish list in 43 queries)")
SHORT_TOKEN_CHARS = Tuned(
    4, "a non-English token this short counts only where a concept's name holds it "
    "(foo, cwd)",
    "eval, fourth round (token shapes): `-ss`, `xxx`, `foo bar baz` stopped listing; "
    "the length itself not measured: set by hand")
AFFIX_CHARS = Tuned(
    3, "... or where a name word ends with it after at most this many more letters "
    "(cwd in getcwd)",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 2 and 5 give the same figures on all 19 sets")

# -- acronyms the corpus defines (acronyms.py) -------------------------------------------

ACRONYM_CHARS = Tuned(
    (2, 10), "the length of a short form (at least, at most)",
    "Schwartz & Hearst (2003); not measured here. The acronyms as a whole: eval, second "
    "round, 125 to 126/136")
ACRONYM_WINDOW = Tuned(
    (5, 2), "a long form before its (SF) is at most min(len(SF) + a, b * len(SF)) words",
    "Schwartz & Hearst (2003); not measured here")
ACRONYM_EXTRA_WORDS = Tuned(
    2, "a long form has at most this many words more than its acronym has letters",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, one noise "
    "sample): 1 and 3 give the same figures on all 19 sets")

# -- the default threshold (calibrate.py) ------------------------------------------------

FALLBACK_THRESHOLD = Tuned(
    0.6, "the default before any calibration (and when the setting is unreadable)",
    "ADR-508's fallback; not measured")
NOISE_MARGIN = Tuned(
    0.03, "default = the noise floor + this, rounded up to hundredths",
    "eval, third round: at 0.02 the worst real-word nonsense (0.275 on the stdlib) "
    "listed over a default of 0.27 (1/59); 0.03 gave 0/59 and 130/136 (fitted to the "
    "shipped stdlib gibberish: the real safety is thin)")
NO_WORDNET_FLOOR = Tuned(
    0.55, "the least default a calibration without WordNet chooses: without it the "
    "reading cannot tell a placeholder (`foo`) from a word, nor nonsense around one "
    "corpus word from a query, and keeps the seeded noise at 0 (the rule gave 0.03 "
    "on the manual pages)",
    "eval with WordNet hidden (docs/eval.md, \"Without WordNet\"): the highest "
    "gibberish score over the stdlib, kitchen and manpages sets was 0.512 "
    "(`foo_bar_baz` over the standard library; `--foo` 0.406 over the manual pages, "
    "`orbit pickle democracy` 0.304 over the kitchen); 0.512 + NOISE_MARGIN, rounded up")
NOISE_OUTLIERS = Tuned(
    2, "concepts attracting the most noise left out of the floor (a junk concept "
    "cannot drag the default)",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, 16 noise samples): "
    "1 raises the stdlib default to 0.32 (gibberish in 13 queries against 17, the "
    "question sets' single words; one everyday-heldout and one stdlib query lost); 3 "
    "gives 0.27 and 20")
SMALL_CORPUS_OUTLIERS = Tuned(
    1, "... in a corpus of fewer than OUTLIER_CORPUS concepts",
    "the man pages (docs/server.md): leaving out two dropped the default from 0.22 to "
    "0.14, below the eval's own nonsense (`tuesday window theory`, 0.17)")
OUTLIER_CORPUS = Tuned(
    1000, "the corpus size from which NOISE_OUTLIERS apply",
    "not swept: it only decides which outlier count applies, and any value from 320 "
    "to 6,910 treats the three corpora (67, 319 and 6,910 concepts) alike")
NOISE_PER_SHAPE = Tuned(
    30, "seeded noise queries of each shape",
    "sweep, seventh round (scripts/sweep_tuning.py over the 19 sets, 16 noise samples): "
    "20 gives defaults 0.26/0.22/0.18 (stdlib/kitchen/man pages) and gibberish in "
    "30 queries against 17; 60 gives 0.35/0.28/0.28 and 6, but kitchen-words lists "
    "19/30 against 25/30, and a stdlib and an everyday-heldout query are lost")
NOISE_SAMPLES = Tuned(
    {"everyday nonsense": 2}, "shapes sampled this many times NOISE_PER_SHAPE",
    "eval, third round: 30 everyday-word sentences let 2/59 gibberish list; 60 gave "
    "0/59. Fourth round: more samples raised the stdlib default to 0.35 (128/136)")
NOISE_ROUNDS = Tuned(
    16, "independent samples of the noise (seeds GIBBERISH_SEED, +1, ...): the floor is "
    "the median of their floors",
    "seed study, seventh round (docs/eval.md): one sample's floor is an extreme order "
    "statistic, and over 20 seeds the default ranged 0.23-0.42 on the stdlib, 0.12-0.36 "
    "on the manual pages (0.12 and 0.14 let the eval's gibberish list) and 0.15-0.32 "
    "on the kitchen; the median of 16 samples stays within 0.28-0.31, 0.17-0.22 and "
    "0.22-0.24 over 8 base seeds (8 samples: 0.28-0.34, 0.16-0.22, 0.22-0.25), with the "
    "same eval figures at 0.17 and 0.22 on the manual pages")
GIBBERISH_SEED = Tuned(
    508, "the seed of the noise and of the probes' sample (a calibration is "
    "reproducible)", "not tuned: any fixed seed (named after ADR-508)")
PROBE_COUNT = Tuned(
    40, "relevant probes drawn from the corpus (reported; their median sets `exact`)",
    "not measured: the probes are reported and set `exact`; kg-fuse eval measures "
    "the inherited default, which they do not touch")
PROBE_WORDS = Tuned(
    (4, 8), "a probe is its concept's description words not in its name: at least, "
    "at most",
    "not measured: as PROBE_COUNT")
PROBE_DEPTH = Tuned(
    50, "a probe's concept counts when within this many results",
    "the mount's default listing limit; not measured")
RECALIBRATE_FRACTION = Tuned(
    0.2, "a calibrated default is recalibrated when the corpus grew or shrank by more "
    "than this share",
    "not measured: when to calibrate again, not what; no eval set changes its "
    "corpus")

# -- the presets (presets.py) --------------------------------------------------------------

EXACT_STEP = Tuned(
    0.05, "`exact` is at least the default + this",
    "not measured: set by hand (the full stdlib gives exact 0.49 at default 0.28)")
EXACT_CAP = Tuned(0.99, "`exact` is at most this",
    "not measured: caps a preset, which kg-fuse eval (the inherited default) does "
    "not use")
COMPREHENSIVE_STEP = Tuned(
    0.02, "`comprehensive` is at least this below the default",
    "not measured: as EXACT_CAP")
COMPREHENSIVE_MAX_DROP = Tuned(
    0.10, "`comprehensive` is at most this below the default (below it: noise)",
    "not measured: set by hand (the full stdlib gives comprehensive 0.18, this floor)")
FALLBACK_OFFSETS = Tuned(
    PRESET_OFFSETS,
    "the presets' offsets from the default without a calibration report",
    "not measured: the mount's own fallback, read from kg_fuse/listing/presets.py "
    "PRESET_OFFSETS")

# -- what a model moves (searcher.py) ---------------------------------------------------

BY_MODEL = Tuned(
    {"all-mpnet-base-v2": {"KEYWORD_WEIGHT": 0.2},
     "all-mpnet-base-v2-int8": {"KEYWORD_WEIGHT": 0.2}},
    "the entries of this table (PER_MODEL) a model other than all-MiniLM-L6-v2 was "
    "measured to want otherwise, by model name (an int8 variant has its own row): every "
    "other entry, and every model without a row, takes the table's value",
    "eval, ninth round (scripts/sweep_tuning.py on stores of each model; docs/eval.md): "
    "all-mpnet-base-v2's keyword weight chosen on the development sets of the standard "
    "library and the kitchen (0.3, 0.2, 0.15, 0.1, 0.05) and checked on the manual pages, "
    "which no value had been tried on: 0.1 and 0.15 lowered their default to 0.14 and "
    "0.15 and let 2 of 83 gibberish queries list there; 0.2 lists none, and lists the "
    "expected concept for 177 of the 211 everyday-word queries of the seven everyday "
    "sets against 171 at 0.3 (all-MiniLM-L6-v2: 164). Its int8 variant, measured at 0.3 "
    "and 0.2 on the three corpora: 169 and 174 of the 211, gibberish unchanged")

# -- the near-miss hint (searcher.py) ------------------------------------------------------

NEAR_MISS_FLOOR = Tuned(
    0.3, "the hint searches again down to this score",
    "the platform's rule (API contract); not ours to tune")
NEAR_MISS_SHORT = Tuned(
    3, "a page with fewer results than this gets the hint and the closest concepts",
    "the platform's rule (API contract)")
NEAR_MISS_DEPTH = Tuned(
    2, "the hint looks at this many times the page's limit",
    "the platform's rule (API contract)")
NEAR_MISS_STEP = Tuned(
    0.02, "suggested threshold = the lowest near miss's score - this, two decimals",
    "the platform's rule (API contract)")
CLOSEST = Tuned(
    5, "closest concepts below the threshold named when a page comes back short (ours)",
    "not measured: display only (the near misses a short listing names)")

#: The entries a model's row of BY_MODEL may move: each is read through
#: :func:`for_model`, never as the table's value alone.
PER_MODEL = ("KEYWORD_WEIGHT",)


@dataclass(frozen=True)
class ModelTuning:
    """The values of :data:`PER_MODEL` one model searches with."""

    keyword_weight: float


def for_model(name: str) -> ModelTuning:
    """The table's values for the model ``name``, as its row of BY_MODEL moves them."""
    moved = BY_MODEL.value.get(name, {})
    return ModelTuning(keyword_weight=moved.get("KEYWORD_WEIGHT", KEYWORD_WEIGHT.value))


#: Every entry, in the order above: name -> entry.
TABLE: dict[str, Tuned] = {name: entry for name, entry in globals().items()
                           if isinstance(entry, Tuned)}


def render() -> str:
    """The table as plain text."""
    lines = []
    for name, entry in TABLE.items():
        lines += [f"{name} = {entry.value!r}", f"    for: {entry.purpose}",
                  f"    chosen by: {entry.chosen_by}"]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render())
