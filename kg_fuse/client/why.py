"""Why a search result matched, as our server says it (an extra field, ``why``, of each
result; the platform sends none): the parts of its score and the query words the search
matched there. Parsed leniently: a malformed ``why`` reads as absent, never as a
failed search."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class MatchedWord:
    """A query word the server's keyword search matched at a result."""

    word: str  # the query's word (folded)
    term: str  # the corpus word that counted there: the word, a form, a reading
    reading: str  # corpus, form, typo, meaning, name, number
    via: str  # how ``term`` relates to ``word``: corpus, form, typo, synonym, broader...
    part: float  # its share of ``ServerWhy.words``


@dataclass(frozen=True, slots=True)
class ServerWhy:
    """A result's score in the server's parts: ``meaning + words`` is the score."""

    meaning: float
    words: float
    keyword: float
    familiarity: float
    matched: tuple[MatchedWord, ...]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _word(raw: Any) -> MatchedWord | None:
    if not isinstance(raw, dict):
        return None
    texts = [raw.get(k) for k in ("word", "term", "reading", "via")]
    part = _number(raw.get("part"))
    if part is None or not all(isinstance(t, str) for t in texts):
        return None
    return MatchedWord(*texts, part)  # type: ignore[arg-type]


def parse_why(raw: Any) -> ServerWhy | None:
    """A result's ``why``, or None when absent or malformed."""
    if not isinstance(raw, dict):
        return None
    numbers = [_number(raw.get(k)) for k in ("meaning", "words", "keyword", "familiarity")]
    matched = raw.get("matched")
    if any(n is None for n in numbers) or not isinstance(matched, list):
        return None
    words = tuple(w for w in map(_word, matched) if w is not None)
    meaning, added, keyword, familiarity = numbers
    return ServerWhy(meaning, added, keyword, familiarity, words)  # type: ignore[arg-type]
