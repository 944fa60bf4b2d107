"""The keyword side of hybrid search (Orama's deep recall): SQLite FTS5 with ``bm25()``.

The ``concept_text`` FTS5 table (see :mod:`kg_fuse.server.storage.store`) holds each concept's
name split into words, its signature, description and examples; its rowid is the
concept's rowid, so deleting a concept deletes its text by trigger.

User text never reaches FTS5 as syntax: the query is cut into word tokens here (letters
and digits, as FTS5's unicode61 tokenizer does), and each token is sent as a quoted
string on its own, so quotes, ``*``, ``NEAR``, ``-``, ``:``, ``^`` and parentheses are
text.

**Normalisation.** Orama divides keyword scores by the batch's best one, so the top hit
always scores 1.0 however weak the match: a gibberish query with one token that happens
to occur somewhere would get a full keyword score and lift the noise floor. Here the
batch rule is applied per query term and weighted by what the term is worth:

    kw(c) = sum over terms t: idf(t) * penalty(t) * bm25_t(c) / max_d bm25_t(d)
            ---------------------------------------------------------------
                          sum over all query terms t: idf(t)

``bm25_t`` is the term's own FTS5 score (local normalisation within its batch, Orama's
rule); a term absent from the corpus (most gibberish) counts in the denominator with the
highest IDF, so it pulls the score down instead of being ignored; very common terms
(in more than :data:`COMMON_FRACTION` of concepts) carry almost no IDF and are left out
of both sums. ``kw`` is in [0, 1] and reaches 1 only when one concept is the best match
of every informative word of the query.

**Words in the user's words.** The query is read first
(:mod:`kg_fuse.server.search.understand`): each word looks up the corpus words it stands for
(itself, its other forms, a typo's correction, or WordNet's bridges), and counts for a
concept by the best of them, weighted by what each carries of the word. A word the
corpus does not use keeps the highest IDF in the denominator, so a bridge or a
correction helps without ever making the word count fully.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from typing import NamedTuple

from cachetools import LRUCache

from kg_fuse.server.search import lexicon, tuning
from kg_fuse.server.search.bridges import Bridge
from kg_fuse.server.search.understand import QueryReading, WordReading
from kg_fuse.server.search.words import Vocabulary
from kg_fuse.server.storage import search_rows
from kg_fuse.server.storage.search_rows import KeywordIndex
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)

PER_TERM = tuning.KEYWORD_PER_TERM.value  # keyword candidates fetched per query term
COMMON_FRACTION = tuning.COMMON_FRACTION.value
#: Column weights for bm25(): concept_id (unindexed), name, signature, description,
#: examples. A word in the name says more than the same word deep in the examples.
BM25_WEIGHTS = tuning.BM25_WEIGHTS.value
CACHED_TERMS = 2048     # terms whose top rows are kept (about 200 rows each)

_BM25_ARGS = ", ".join(str(w) for w in BM25_WEIGHTS)


class TermCache:
    """What a term's lookups return while the indexed text stays the same: its document
    count and its normalised top rows. A search repeats the same few hundred words, so
    most queries then touch SQLite not at all. Owned by one index generation (the
    knowledge graph makes a new one whenever the text changes); bounded (LRU)."""

    def __init__(self, maxsize: int = CACHED_TERMS) -> None:
        self.counts: LRUCache[str, int] = LRUCache(maxsize * 8)
        self.rows: LRUCache[tuple[str, int, bool], list[tuple[str, float]]] = LRUCache(
            maxsize)


def quote(token: str) -> str:
    """A token as an FTS5 string literal: always quoted, inner quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


def idf(total: int, doc_count: int) -> float:
    """FTS5's own IDF, floored at zero."""
    return max(0.0, math.log((total - doc_count + 0.5) / (doc_count + 0.5)))


#: The stems of the keyword index's terms, kept in the store's settings
STEMS_KEY = "vocabulary_stems"


def load_vocabulary(store: Store) -> Vocabulary:
    """Every term of the keyword index, by stem too (for word forms), and the words of
    concepts' names."""
    with search_rows.keyword_index(store) as index:
        terms = index.terms()
        _remember_stems(index, terms)
        return Vocabulary.of(terms, index.name_terms())


def _remember_stems(index: KeywordIndex, terms: list[str]) -> None:
    """Stems kept from the last start: stemming the standard library's 9,929 terms in
    Python took 0.75 s of every start (a quarter of it, on a loaded machine). Kept with
    the stemmer's name and version, so another stemmer's are never used; written again
    whenever the terms have changed."""
    raw = index.setting(STEMS_KEY)
    kept: dict[str, str] = {}
    try:
        saved = json.loads(raw) if raw is not None else {}
    except ValueError:
        saved = None
    if not isinstance(saved, dict):
        log.warning("unreadable %s setting; stemming the vocabulary again", STEMS_KEY)
    elif saved.get("stemmer") == lexicon.STEMMER and isinstance(saved.get("stems"), dict):
        kept = saved["stems"]
    lexicon.known_stems(kept)
    if all(term in kept for term in terms):
        return
    stems = {term: lexicon.stem(term) for term in terms}
    refused = index.keep_setting(
        STEMS_KEY, json.dumps({"stemmer": lexicon.STEMMER, "stems": stems}))
    if refused is not None:  # a read-only store: stem again next time
        log.info("could not keep the vocabulary's stems: %s", refused)


def load_names(store: Store) -> frozenset[str]:
    """The terms of the index's name column."""
    with search_rows.keyword_index(store) as index:
        return index.name_terms()


def _doc_counts(index: KeywordIndex, terms: Iterable[str],
                cache: TermCache | None = None) -> dict[str, int]:
    """Term -> number of concepts containing it (absent terms left out).

    ``cache`` saves the lookups of terms seen before (0 stands for absent).
    """
    counts: dict[str, int] = {}
    for term in terms:  # one indexed lookup each: fts5vocab scans for IN (...)
        n = cache.counts.get(term) if cache is not None else None
        if n is None:
            n = index.documents(term)
            if cache is not None:
                cache.counts[term] = n
        if n:
            counts[term] = n
    return counts


class WordPlan(NamedTuple):
    """One query word's lookups: corpus terms with the weight and the factor (share of
    the word) each carries; ``bridged`` for a word read through its meaning."""

    position: int
    terms: list[tuple[str, float, float]]
    bridged: bool
    in_name: bool = False


class KeywordMatch(NamedTuple):
    """Keyword scores in [0, 1], and where each word read through its meaning found a
    bridge: concept id -> {word position: best bridge factor there}."""

    scores: dict[str, float]
    bridged: dict[str, dict[int, float]]


#: Readings of a word the corpus uses itself (in any form, or as a number).
OWN_WORDS = ("corpus", "form", "number")


def _plan(index: KeywordIndex, reading: QueryReading, total: int,
          cache: TermCache | None = None) -> tuple[list[WordPlan], float]:
    """Each word's terms with their weights, and the denominator (:func:`_word_plan`).

    Numbers and punctuation alone name no topic (they are one of the noise shapes): a
    query without a word of letters gets no keyword score.
    """
    terms = {b.term for w in reading.words for b in w.alternatives}
    counts = _doc_counts(index, sorted(terms), cache)
    plans: list[WordPlan] = []
    denominator = 0.0
    for position, word in enumerate(reading.words):
        present = [(b, counts[b.term]) for b in word.alternatives if b.term in counts]
        weight, plan = _word_plan(position, word, present, total)
        denominator += weight
        if plan is not None:
            plans.append(plan)
    return plans, denominator


def _word_plan(position: int, word: WordReading, present: list[tuple[Bridge, int]],
               total: int) -> tuple[float, WordPlan | None]:
    """One word's weight in the denominator and its lookups, by how it was read.

    A word the corpus uses weighs its IDF (its most frequent form's, for a form); one it
    does not use weighs the highest IDF in the denominator and its bridges or typo
    correction add at most their factor of their own IDF. Very common terms count in
    neither sum.
    """
    if word.kind in OWN_WORDS:
        return _own_word(position, present, total)
    if word.kind == "name" and present:
        return _name_word(position, present, total)
    return _word_read_through(position, word, present, total)


def _own_word(position: int, present: list[tuple[Bridge, int]], total: int
              ) -> tuple[float, WordPlan | None]:
    """A word of the corpus (or a form, a number): its most frequent form's IDF, unless
    it is very common (then it counts nowhere)."""
    if not present or max(n for _, n in present) > COMMON_FRACTION * total:
        return 0.0, None
    weight = idf(total, max(n for _, n in present))
    return weight, WordPlan(position, [(b.term, weight * b.factor, b.factor)
                                       for b, _ in present], False)


def _name_word(position: int, present: list[tuple[Bridge, int]], total: int
               ) -> tuple[float, WordPlan]:
    """A name token weighs as the name's word, looked up in names only."""
    weight = idf(total, max(n for _, n in present))
    return weight, WordPlan(position, [(b.term, weight, b.factor) for b, _ in present],
                            True, in_name=True)


def _word_read_through(position: int, word: WordReading,
                       present: list[tuple[Bridge, int]], total: int
                       ) -> tuple[float, WordPlan | None]:
    """A word the corpus does not use: the highest IDF in the denominator, its bridges
    (a typo's fix, its meanings) each at most its factor of its own IDF. A common bridge
    adds no score, but it still shows where the word's meaning is."""
    kept = [(b.term, b.factor * idf(total, n) if n <= COMMON_FRACTION * total else 0.0,
             b.factor) for b, n in present]
    return idf(total, 0), (WordPlan(position, kept, word.kind == "meaning") if kept else None)


def keyword_scores(store: Store, reading: QueryReading, total: int,
                   per_term: int = PER_TERM, cache: TermCache | None = None
                   ) -> KeywordMatch:
    """The concepts the query's words match, each word counting by the best of its
    terms, and where its WordNet bridges occur."""
    if total <= 0:
        return KeywordMatch({}, {})
    with search_rows.keyword_index(store) as index:
        plans, denominator = _plan(index, reading, total, cache)
        if not plans or denominator <= 0:
            return KeywordMatch({}, {})
        scores, found = _word_scores(index, plans, per_term, cache)
    return KeywordMatch({cid: min(1.0, value / denominator) for cid, value in scores.items()},
                        _bridged(found))


def _word_scores(index: KeywordIndex, plans: list[WordPlan], per_term: int,
                 cache: TermCache | None
                 ) -> tuple[dict[str, float], dict[str, dict[str, tuple[float, int]]]]:
    """Each concept's sum over the words of the best of each word's terms there, and the
    bridge terms found at it: concept -> bridge term -> (factor, word position)."""
    scores: dict[str, float] = {}
    found: dict[str, dict[str, tuple[float, int]]] = {}
    for plan in plans:
        best: dict[str, float] = {}
        for term, weight, factor in plan.terms:
            for cid, share in _term_rows(index, term, per_term, cache, plan.in_name):
                best[cid] = max(best.get(cid, 0.0), weight * share)
                if plan.bridged:
                    terms = found.setdefault(cid, {})
                    terms[term] = max(terms.get(term, (0.0, -1)), (factor, plan.position))
        for cid, value in best.items():
            scores[cid] = scores.get(cid, 0.0) + value
    return scores, found


def _bridged(found: dict[str, dict[str, tuple[float, int]]]) -> dict[str, dict[int, float]]:
    """Concept -> {word position: its best bridge factor there}. One word of the
    concept's text is evidence for one query word only: "whispers" and "thunder" both
    reaching a text through "sound" is one piece of evidence."""
    bridged: dict[str, dict[int, float]] = {}
    for cid, terms in found.items():
        seen = bridged.setdefault(cid, {})
        for factor, position in terms.values():
            seen[position] = max(seen.get(position, 0.0), factor)
    return bridged


def _term_rows(index: KeywordIndex, term: str, per_term: int,
               cache: TermCache | None, in_name: bool = False) -> list[tuple[str, float]]:
    """A term's top concepts (``in_name``: those whose name holds it) with bm25 divided
    by the batch best (in (0, 1])."""
    key = (term, per_term, in_name)
    if cache is not None and (hit := cache.rows.get(key)) is not None:
        return hit
    rows = index.matches(("name : " if in_name else "") + quote(term), per_term, _BM25_ARGS)
    best = max((r[1] for r in rows), default=0.0)
    shares = [(cid, max(0.0, s) / best) for cid, s in rows] if best > 0 else []
    if cache is not None:
        cache.rows[key] = shares
    return shares


class WordFound(NamedTuple):
    """A query word the keyword index matched at a concept: the corpus term that counted
    there (its best), and its part of the concept's keyword score."""

    position: int
    term: str
    part: float


def words_at(store: Store, reading: QueryReading, total: int, ids: Iterable[str],
             per_term: int = PER_TERM, cache: TermCache | None = None
             ) -> dict[str, list[WordFound]]:
    """For each of ``ids``, the query words the keyword index matched there (the same
    lookups as :func:`keyword_scores`, from the same cache): why a result matched is
    said by the search that scored it, not guessed from its text afterwards."""
    wanted = set(ids)
    found: dict[str, list[WordFound]] = {}
    if total <= 0 or not wanted:
        return found
    with search_rows.keyword_index(store) as index:
        plans, denominator = _plan(index, reading, total, cache)
        if denominator <= 0:
            return found
        for plan in plans:
            best: dict[str, tuple[float, str]] = {}
            for term, weight, _factor in plan.terms:
                for cid, share in _term_rows(index, term, per_term, cache, plan.in_name):
                    if cid in wanted and (cid not in best or weight * share > best[cid][0]):
                        best[cid] = (weight * share, term)
            for cid, (value, term) in best.items():
                found.setdefault(cid, []).append(
                    WordFound(plan.position, term, value / denominator))
    return found
