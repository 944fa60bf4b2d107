"""Why a result matched, as the search that scored it computed it: the parts of its
score (the meaning, the vector part, and what the query's words added) and the words
the keyword index matched there, each with the corpus term that counted (the query word
itself, another form, a typo's fix, or a WordNet reading such as ``chronometer`` read
as ``timer``).

Computed for a page's results only, from what the search had at hand (the prepared
query vector and keyword rows of the same index generation, the cached term lookups),
so it says what scored, not what a reader might guess from the text afterwards.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np

from kg_fuse.server.search import keywords
from kg_fuse.server.search.index import ConceptIndex, KeywordRows
from kg_fuse.server.search.scan import exact_scores
from kg_fuse.server.search.understand import QueryReading
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model.scale import ScoreScale

log = logging.getLogger(__name__)


class WordMatch(NamedTuple):
    """A query word the keyword index matched at a result."""

    word: str  # as the query says it (folded)
    term: str  # the corpus word that counted there
    reading: str  # how the word was read: corpus, form, typo, meaning, name, number
    via: str  # the relation of ``term`` to ``word``: corpus, form, typo, synonym, ...
    part: float  # its part of the score (a share of ``ScoreParts.words``)


class ScoreParts(NamedTuple):
    """A result's score in parts: ``meaning + words == score``."""

    meaning: float  # the vector part: the model's similarity, familiarity applied
    words: float  # what the keyword match added to it
    keyword: float  # the keyword score in [0, 1] that added ``words``
    familiarity: float  # the factor the model's similarity was scaled by (1: none)
    matched: tuple[WordMatch, ...]


def score_parts(store: Store, index: ConceptIndex, reading: QueryReading,
                vector: np.ndarray, keyword: KeywordRows, scale: ScoreScale,
                page: list[tuple[str, float]], cache: keywords.TermCache | None = None
                ) -> dict[str, ScoreParts]:
    """The parts of each page result's score (``page``: concept id and score, as the
    search ranked them over ``index``)."""
    page = [(cid, score) for cid, score in page if cid in index.row_of]
    ids = [cid for cid, _ in page]
    if not ids:
        return {}
    rows = np.fromiter((index.row_of[cid] for cid in ids), np.int64, len(ids))
    kw, factor = _keyword_at(keyword, rows)
    products = scale.scores(exact_scores(index.matrix[rows], vector), keyword.weight)
    meaning = np.clip(products * factor, 0.0, 1.0)
    found = keywords.words_at(store, reading, len(index), ids, cache=cache)
    familiarity = (factor * np.float32(keyword.weight)).tolist()
    parts: dict[str, ScoreParts] = {}
    for cid, (_, score), v, k, f in zip(ids, page, meaning.tolist(), kw.tolist(),
                                        familiarity, strict=True):
        # the search's own score is the sum: what the words added is the rest of it
        vector_part = min(v, score) if k > 0 else score
        words = score - vector_part
        matched = found.get(cid)
        parts[cid] = ScoreParts(vector_part, words, k, f,
                                _matched(reading, matched, words) if matched else ())
    return parts


def _keyword_at(keyword: KeywordRows, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's keyword score and familiarity factor (``rest`` where it has none)."""
    kw = np.zeros(len(rows), np.float32)
    factor = np.full(len(rows), keyword.rest, np.float32)
    if keyword.rows.size:
        same = keyword.rows[:, None] == rows[None, :]
        has = same.any(axis=0)
        which = same.argmax(axis=0)
        kw = np.where(has, keyword.values[which], kw)
        if keyword.factors is not None:
            factor = np.where(has, keyword.factors[which], factor)
        else:
            factor = np.where(has, np.float32(1.0), factor)
    return kw, factor


def _matched(reading: QueryReading, found: list[keywords.WordFound], words: float
             ) -> tuple[WordMatch, ...]:
    """The words matched at one result, each with its share of the words' part."""
    total = sum(f.part for f in found)
    share = words / total if total > 0 else 0.0
    out = []
    for f in sorted(found):
        word = reading.words[f.position]
        via = next((b.via for b in word.alternatives if b.term == f.term), word.kind)
        out.append(WordMatch(word.word, f.term, word.kind, via, f.part * share))
    return tuple(out)
