"""The keyword side of hybrid search (Orama's deep recall): SQLite FTS5 with ``bm25()``.

The ``concept_text`` FTS5 table (see :mod:`kg_fuse.server.store`) holds each concept's
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

**Typos.** A token of at least :data:`TYPO_MIN_CHARS` letters that the corpus does not
contain is matched against the corpus vocabulary at edit distance 1 (the most frequent
candidate wins) at half weight, while its denominator share stays that of an unknown
token: a corrected typo helps, a gibberish token that happens to be one edit from a
word gains little. Shorter tokens are never corrected: at 3-4 letters almost every
string is one edit from some word.
"""

from __future__ import annotations

import math
import re
import sqlite3
import unicodedata
from collections.abc import Iterable

from cachetools import LRUCache

PER_TERM = 200          # keyword candidates fetched per query term
MAX_TERMS = 16          # longer queries: the first 16 distinct tokens
COMMON_FRACTION = 0.1
TYPO_MIN_CHARS = 5
TYPO_PENALTY = 0.5
#: Column weights for bm25(): concept_id (unindexed), name, signature, description,
#: examples. A word in the name says more than the same word deep in the examples.
BM25_WEIGHTS = (0.0, 4.0, 1.0, 2.0, 1.0)
#: How much of the vector score a query loses when the corpus knows none of its words.
UNFAMILIAR_DISCOUNT = 0.4
CACHED_TERMS = 2048     # terms whose top rows are kept (about 200 rows each)

_BM25_ARGS = ", ".join(str(w) for w in BM25_WEIGHTS)
_TOKEN = re.compile(r"[^\W_]+")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class TermCache:
    """What a term's lookups return while the indexed text stays the same: its document
    count and its normalised top rows. A search repeats the same few hundred words, so
    most queries then touch SQLite not at all. Owned by one index generation (the
    knowledge graph makes a new one whenever the text changes); bounded (LRU)."""

    def __init__(self, maxsize: int = CACHED_TERMS) -> None:
        self.counts: LRUCache[str, int] = LRUCache(maxsize * 8)
        self.rows: LRUCache[tuple[str, int], list[tuple[str, float]]] = LRUCache(maxsize)


def _fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c)).lower()


def tokens(text: str) -> list[str]:
    """Distinct lower-case word tokens, diacritics removed (as unicode61 does)."""
    return list(dict.fromkeys(_TOKEN.findall(_fold(text))))[:MAX_TERMS]


def quote(token: str) -> str:
    """A token as an FTS5 string literal: always quoted, inner quotes doubled."""
    return '"' + token.replace('"', '""') + '"'


def idf(total: int, doc_count: int) -> float:
    """FTS5's own IDF, floored at zero."""
    return max(0.0, math.log((total - doc_count + 0.5) / (doc_count + 0.5)))


def edits1(word: str) -> set[str]:
    """Every string one deletion, transposition, replacement or insertion away."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return (deletes | transposes | replaces | inserts) - {word}


def load_vocabulary(conn: sqlite3.Connection) -> frozenset[str]:
    """Every term of the keyword index (typo candidates are looked up here)."""
    return frozenset(r[0] for r in conn.execute("SELECT term FROM concept_terms"))


#: English function words (the Snowball stop list): whether a corpus happens to use
#: "why" or "my" says nothing about whether a query is about its subject, so they do not
#: count for familiarity.
_STOPWORDS = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves what which
who whom this that these those am is are was were be been being have has had having do
does did doing a an the and but if or because as until while of at by for with about
against between into through during before after above below to from up down in out on
off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very can will just
don should now
"""
STOPWORDS = frozenset(_STOPWORDS.split())


def judged_words(query: str) -> list[str]:
    """The words familiarity is judged on: tokens of two or more characters with a
    letter in them, English function words left out (unless there is nothing else)."""
    words = [t for t in tokens(query) if len(t) >= 2 and any(c.isalpha() for c in t)]
    return [t for t in words if t not in STOPWORDS] or words


def _unknown_weight(word: str, vocabulary: frozenset[str]) -> float:
    """0 for a word the corpus uses, half for one a typo away (the keyword rule: five or
    more letters), 1 for a word it never uses."""
    if word in vocabulary:
        return 0.0
    typo = (len(word) >= TYPO_MIN_CHARS and word.isalpha() and word.isascii()
            and not edits1(word).isdisjoint(vocabulary))
    return TYPO_PENALTY if typo else 1.0


def unknown_fraction(query: str, vocabulary: frozenset[str]) -> float:
    """The share of the query's words this corpus has never seen, in [0, 1]
    (:func:`judged_words`; a typo of a known word counts half). A query without such
    words (digits and punctuation only) is wholly unknown.
    """
    words = judged_words(query)
    if not words:
        return 1.0
    return sum(_unknown_weight(w, vocabulary) for w in words) / len(words)


def unknown_words(query: str, vocabulary: frozenset[str]) -> list[str]:
    """The query's words this corpus never uses (nor one typo away): what to rephrase
    when a search lists little or nothing."""
    if not vocabulary:
        return []
    return [w for w in dict.fromkeys(judged_words(query))
            if _unknown_weight(w, vocabulary) == 1.0]


def familiarity(query: str, vocabulary: frozenset[str],
                discount: float = UNFAMILIAR_DISCOUNT) -> float:
    """The factor a query's scores are multiplied by: 1 when the corpus knows every word
    of it, ``1 - discount * unknown share`` when it knows some, 0 when it knows none.

    A query without one word this corpus uses (nor one typo away from one) gives the
    model nothing to go on: its cosines are where the model happens to put random
    letters or punctuation (short concepts such as ``math.gcd``), and its only keyword
    matches are digit tokens. Such a query matches nothing (see docs/server.md,
    "Familiarity").
    """
    if not vocabulary:
        return 1.0
    unknown = unknown_fraction(query, vocabulary)
    return 0.0 if unknown >= 1.0 else 1.0 - discount * unknown


def add_to_vocabulary(vocabulary: frozenset[str], texts: Iterable[str]) -> frozenset[str]:
    """The vocabulary with the words of new texts (removed words may linger: harmless,
    a stale candidate matches nothing)."""
    new = {t for text in texts for t in _TOKEN.findall(_fold(text))}
    return vocabulary | new if new - vocabulary else vocabulary


def _doc_counts(conn: sqlite3.Connection, terms: Iterable[str],
                cache: TermCache | None = None) -> dict[str, int]:
    """Term -> number of concepts containing it (absent terms left out).

    ``cache`` saves the lookups of terms seen before (0 stands for absent).
    """
    counts: dict[str, int] = {}
    for term in terms:  # one indexed lookup each: fts5vocab scans for IN (...)
        n = cache.counts.get(term) if cache is not None else None
        if n is None:
            row = conn.execute("SELECT doc FROM concept_terms WHERE term = ?",
                               (term,)).fetchone()
            n = int(row[0]) if row is not None else 0
            if cache is not None:
                cache.counts[term] = n
        if n:
            counts[term] = n
    return counts


def _plan(conn: sqlite3.Connection, query: str, total: int, vocabulary: frozenset[str],
          cache: TermCache | None = None) -> tuple[list[tuple[str, float]], float]:
    """The terms to look up with their weights, and the denominator.

    Numbers and punctuation alone name no topic (they are one of the noise shapes): a
    query without a word of letters gets no keyword score, only its discounted vector
    score, so ``42 42 42`` does not match a manual page's date examples.
    """
    toks = [t for t in tokens(query) if len(t) >= 2]
    if not any(c.isalpha() for t in toks for c in t):
        return [], 0.0
    counts = _doc_counts(conn, toks, cache)
    terms: list[tuple[str, float]] = []
    denominator = 0.0
    for tok in toks:
        n = counts.get(tok, 0)
        if n > COMMON_FRACTION * total:
            continue
        weight = idf(total, n)
        denominator += weight
        if n:
            terms.append((tok, weight))
        elif len(tok) >= TYPO_MIN_CHARS and tok.isalpha() and tok.isascii():
            near = _doc_counts(conn, sorted(edits1(tok) & vocabulary), cache)
            if near:
                best = max(near, key=lambda t: (near[t], t))
                if near[best] <= COMMON_FRACTION * total:
                    terms.append((best, TYPO_PENALTY * idf(total, near[best])))
    return terms, denominator


def keyword_scores(conn: sqlite3.Connection, query: str, total: int,
                   vocabulary: frozenset[str] = frozenset(),
                   per_term: int = PER_TERM, cache: TermCache | None = None
                   ) -> dict[str, float]:
    """Concept id -> keyword score in [0, 1] for the concepts the query's words match."""
    if total <= 0:
        return {}
    terms, denominator = _plan(conn, query, total, vocabulary, cache)
    if not terms or denominator <= 0:
        return {}
    scores: dict[str, float] = {}
    for term, weight in terms:
        for cid, share in _term_rows(conn, term, per_term, cache):
            scores[cid] = scores.get(cid, 0.0) + weight * share
    return {cid: min(1.0, s / denominator) for cid, s in scores.items()}


def _term_rows(conn: sqlite3.Connection, term: str, per_term: int,
               cache: TermCache | None) -> list[tuple[str, float]]:
    """A term's top concepts with bm25 divided by the batch best (in (0, 1])."""
    key = (term, per_term)
    if cache is not None and (hit := cache.rows.get(key)) is not None:
        return hit
    rows = conn.execute(
        f"SELECT concept_id, -bm25(concept_text, {_BM25_ARGS}) AS s FROM concept_text "
        "WHERE concept_text MATCH ? ORDER BY s DESC LIMIT ?",
        (quote(term), per_term)).fetchall()
    best = max((r[1] for r in rows), default=0.0)
    shares = [(cid, max(0.0, s) / best) for cid, s in rows] if best > 0 else []
    if cache is not None:
        cache.rows[key] = shares
    return shares
