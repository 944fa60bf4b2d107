"""Why a result is listed, in a few lines a user reads on the file's first screen, and
summed up for the listing in ``.meta/status``.

Two sources, each said for what it is. Where the query's words are (label, signature,
description, evidence) the mount finds itself, in the text the file shows: the query's
words, and the corpus words the server read them as (``chronometer`` as ``timer``).
The score's parts (meaning, words) and which words the search matched come from the
server when it says so (ours: each result's ``why``); the platform says neither, so
there the file says the score is the platform's and the words were found by the mount.

Pure functions of a search result, its details and the listing, run once per listing
when its files are rendered (so sizes stay exact).
"""

from __future__ import annotations

import functools
import logging
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from kg_fuse.client.models import ConceptDetail, ConceptHit
from kg_fuse.client.why import ServerWhy
from kg_fuse.stopwords import STOPWORDS

log = logging.getLogger(__name__)

PLACES = ("label", "signature", "description", "evidence")
#: How a reading relates to the query's word, as the server names it.
HOW = {"form": "another form", "typo": "a typo's fix", "synonym": "WordNet: a synonym",
       "broader": "WordNet: a broader term", "related": "WordNet: a related word",
       "gloss": "WordNet: a word of its definition", "meaning": "WordNet"}
_TOKEN = re.compile(r"[^\W_]+")
#: Unicode's blocks of combining marks (what NFKD splits a letter's accents into)
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def fold(text: str) -> str:
    """Lower case, diacritics removed (as the server's keyword index reads text)."""
    if text.isascii():
        return text.lower()
    return _COMBINING.sub("", unicodedata.normalize("NFKD", text)).lower()


def query_words(text: str) -> tuple[str, ...]:
    """The query's words that can say why something matched: no function words, no
    single letters, no bare numbers; each once, in order."""
    words = [t for t in _TOKEN.findall(fold(text))
             if len(t) >= 2 and any(c.isalpha() for c in t) and t not in STOPWORDS]
    return tuple(dict.fromkeys(words))


#: Endings a word may take in the text and still be the query's word (``compress``:
#: ``compressed``, ``compression``): a reader's sense of "the same word", kept simple.
SUFFIXES = ("s", "es", "ed", "d", "ing", "ion", "ions", "er", "ers", "ly")


@functools.lru_cache(maxsize=4096)
def _forms(term: str) -> frozenset[str]:
    """The word and the forms a reader takes for it: with an ending (``encode``:
    ``encoding``), or less one (``files``: ``file``)."""
    stem = term[:-1] if term.endswith("e") else term
    out = {term, *(term + s for s in SUFFIXES), *(stem + s for s in SUFFIXES)}
    for suffix in SUFFIXES:
        if term.endswith(suffix) and len(term) - len(suffix) >= 3:
            out.add(term[:-len(suffix)])
    return frozenset(out)


def _words(text: str, names: bool = False) -> frozenset[str]:
    """A text's words; ``names``: camel case and dotted names split too (``GzipFile``)."""
    found = set(_TOKEN.findall(fold(text)))
    if names:
        found.update(_TOKEN.findall(fold(_CAMEL.sub(" ", text))))
    return frozenset(found)


@dataclass(frozen=True)
class Listing:
    """What every result of one listing is explained against."""

    words: tuple[str, ...]  # the query's words (the query's own term)
    threshold: float  # the threshold the query's own term was searched at
    inherited: bool  # it is the server default
    best: float  # the best listed score
    readings: dict[str, tuple[str, ...]] = field(default_factory=dict)  # word -> terms
    how: dict[tuple[str, str], str] = field(default_factory=dict)  # (word, term) -> via


def listing(text: str, threshold: float, inherited: bool, hits: list[ConceptHit],
            readings: tuple[tuple[str, tuple[str, ...]], ...]) -> Listing:
    """The context of a listing: its words, threshold, best score, and the readings the
    server reported (for the whole query, and at each result)."""
    how = {(m.word, m.term): m.via for h in hits if h.why for m in h.why.matched}
    return Listing(query_words(text), threshold, inherited,
                   max((h.score for h in hits), default=0.0), dict(readings), how)


@dataclass(frozen=True)
class Found:
    """A query word in a result: as ``term`` (the word itself, or a reading), where."""

    word: str
    term: str
    places: tuple[str, ...]
    via: str = ""  # how ``term`` reads ``word`` ("" the word itself)


@dataclass(frozen=True)
class ResultWhy:
    """Why one result is listed, and the lines that say it."""

    found: tuple[Found, ...]
    missing: tuple[str, ...]
    by_meaning: bool
    text: str  # the lines (the file's "Why" part, the ``user.kg.why`` attribute)


def _texts(hit: ConceptHit, detail: ConceptDetail | None) -> dict[str, frozenset[str]]:
    """The words of each place the file shows."""
    description = (detail.description if detail else "") or hit.description
    return {
        "label": _words(hit.label, names=True),
        "signature": _words(detail.signature if detail else "", names=True),
        "description": _words(description),
        "evidence": _words(" ".join(e.quote for e in detail.evidence) if detail else ""),
    }


def _find(word: str, terms: list[str], texts: dict[str, frozenset[str]], ctx: Listing
          ) -> Found | None:
    """Where the word, else its first reading found, stands in the result's text."""
    for term in dict.fromkeys(terms):
        forms = _forms(term)
        places = tuple(p for p in PLACES if not forms.isdisjoint(texts[p]))
        if places:
            via = "" if term == word else ctx.how.get((word, term), "meaning")
            return Found(word, term, places, via)
    return None


def explain(hit: ConceptHit, detail: ConceptDetail | None, ctx: Listing) -> ResultWhy:
    """Why ``hit`` is listed: its words and readings, where they are, its score's parts
    (when the server gives them) against the threshold and the best listed result."""
    texts = _texts(hit, detail)
    server = hit.why
    matched = {m.word: m for m in server.matched} if server else {}
    found: list[Found] = []
    missing: list[str] = []
    for word in ctx.words:
        terms = [word, *ctx.readings.get(word, ())]
        if word in matched:
            terms.insert(1, matched[word].term)
        place = _find(word, terms, texts, ctx)
        if place is None and word in matched:  # matched in text this file does not show
            m = matched[word]
            place = Found(word, m.term, (), "" if m.term == word else m.via)
        if place is None:
            missing.append(word)
        else:
            found.append(place)
    by_meaning = (server.words <= 0 and not server.matched) if server else not found
    lines = _lines(hit, server, ctx, found, missing, by_meaning)
    return ResultWhy(tuple(found), tuple(missing), by_meaning, "\n".join(lines) + "\n")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _place_text(f: Found) -> str:
    where = f"in the {_and(list(f.places))}" if f.places else "in its indexed text"
    if not f.via:
        return f"{f.word} {where}"
    return f"{f.word} as {f.term} ({HOW.get(f.via, f.via)}) {where}"


def _lines(hit: ConceptHit, server: ServerWhy | None, ctx: Listing, found: list[Found],
           missing: list[str], by_meaning: bool) -> list[str]:
    head = ("Why it is listed:" if server else
            "Why it is listed (the server does not say; the mount found the query's "
            "words in this file's text):")
    lines = [head]
    own = [_place_text(f) for f in found if not f.via]
    read = [_place_text(f) for f in found if f.via]
    if own:
        lines.append("- words: " + "; ".join(own))
    if read:
        lines.append("- read as: " + "; ".join(read))
    if missing:
        lines.append("- not in its text: " + ", ".join(missing))
    if by_meaning:
        lines.append("- by meaning alone: " + (
            "the query's words added nothing to its score" if server else
            "none of the query's words is in its text"))
    lines.append("- score: " + _score_text(hit.score, server))
    lines.append("- threshold: " + _threshold_text(hit.score, ctx))
    return lines


def _score_text(score: float, server: ServerWhy | None) -> str:
    if server is None:
        return f"{score:.4f} (the server's; it does not say what made it)"
    meaning = f"meaning {server.meaning:.4f}"
    if server.familiarity < 0.995:
        meaning += (f" (the model's similarity x{server.familiarity:.2f}: not every word "
                    "is the documents' own)")
    words = f"words {server.words:.4f}"
    shares = [f"{m.word} {m.part:.4f}" for m in server.matched if m.part >= 0.00005]
    if shares:
        words += f" ({', '.join(shares)})"
    return f"{score:.4f} = {meaning} + {words}"


def _threshold_text(score: float, ctx: Listing) -> str:
    source = "the server default" if ctx.inherited else "this query's own"
    text = f"{ctx.threshold:.4g} ({source}), passed by {score - ctx.threshold:.4f}"
    if score >= ctx.best:
        return text + "; the best listed score"
    return text + f"; {ctx.best - score:.4f} below the best listed ({ctx.best:.4f})"


@dataclass(frozen=True)
class Summary:
    """Why a listing's results are listed, summed up for ``.meta/status``."""

    results: int
    words: tuple[tuple[str, int], ...]  # query word -> results whose text holds it
    readings: tuple[tuple[str, int], ...]  # "word as term (how)" -> results
    by_meaning: int
    by_server: bool  # the server said why (else: the mount's reading of the text)


def summarise(whys: list[ResultWhy], ctx: Listing, by_server: bool) -> Summary:
    words: Counter[str] = Counter()
    readings: Counter[str] = Counter()
    for why in whys:
        for f in why.found:
            words[f.word] += 1
            if f.via:
                readings[f"{f.word} as {f.term} ({HOW.get(f.via, f.via)})"] += 1
    return Summary(len(whys), tuple((w, words[w]) for w in ctx.words),
                   tuple(readings.most_common()), sum(w.by_meaning for w in whys),
                   by_server)


def summary_lines(summary: Summary | None) -> list[str]:
    """The status's lines on why the listing's results are listed."""
    if summary is None or not summary.results or not summary.words:
        return []
    n = summary.results
    lines = []
    if not summary.by_server:
        lines.append("why: found by the mount in the results' text (the server does not "
                     "say why a result matched)")
    found = [f"{w} in {c} of {n}" for w, c in summary.words if c]
    if found:
        lines.append("words found: " + ", ".join(found))
    nowhere = [w for w, c in summary.words if not c]
    if nowhere:
        lines.append("words in no result: " + ", ".join(nowhere))
    if summary.readings:
        lines.append("readings used: " + ", ".join(
            f"{r} in {c} of {n}" for r, c in summary.readings))
    reason = ("the query's words added nothing to their scores" if summary.by_server else
              "none of the query's words is in their text")
    lines.append(f"by meaning alone: {summary.by_meaning} of {n}"
                 + (f" ({reason})" if summary.by_meaning else ""))
    return lines
