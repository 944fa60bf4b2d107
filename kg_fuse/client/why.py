"""Why a search result matched, as our server says it (an extra field, ``why``, of each
result; the platform sends none): the parts of its score and the query words the search
matched there. Parsed leniently: a malformed ``why`` reads as absent, never as a
failed search."""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class MatchedWord(NamedTuple):
    """A query word the server's keyword search matched at a result."""

    word: str  # the query's word (folded)
    term: str  # the corpus word that counted there: the word, a form, a reading
    reading: str  # corpus, form, typo, meaning, name, number
    via: str  # how ``term`` relates to ``word``: corpus, form, typo, synonym, broader...
    part: float  # its share of ``ServerWhy.words``


class ServerWhy(NamedTuple):
    """A result's score in the server's parts: ``meaning + words`` is the score."""

    meaning: float
    words: float
    keyword: float
    familiarity: float
    matched: tuple[MatchedWord, ...]


def _numbers(*values: Any) -> bool:
    return all(type(v) in (int, float) and math.isfinite(v) for v in values)


def parse_why(raw: Any) -> ServerWhy | None:
    """A result's ``why``, or None when absent or malformed (every search result of our
    server carries one: kept cheap, a listing parses a page of them)."""
    if not isinstance(raw, dict):
        return None
    try:
        why = ServerWhy(raw["meaning"], raw["words"], raw["keyword"], raw["familiarity"],
                        tuple(MatchedWord(m["word"], m["term"], m["reading"], m["via"],
                                          m["part"]) for m in raw["matched"]))
    except (KeyError, TypeError):
        return None
    if not _numbers(*why[:4]) or not all(
            _numbers(m.part) and all(type(t) is str for t in m[:4]) for m in why.matched):
        return None
    return why
