"""The words of a query and of the corpus: how text is cut into tokens, and what words
the corpus holds.

Every other part of the reading (WordNet's bridges in :mod:`.bridges`, the reading of a
query in :mod:`.understand`, the calibration's noise) compares words: they must all cut
and fold text as the keyword index does, and look words up in the same vocabulary. This
module is that common ground: tokens, the stop list, one-edit spellings, token shapes,
and :class:`Vocabulary` (the corpus's words, by stem and by name).
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from kg_fuse.server.search import tuning
from kg_fuse.server.search.lexicon import WordNet, stem, wordnet

#: Tuned numbers are read from :mod:`.tuning` (what each is for, what chose it); the
#: limits below them bound cost.
MAX_TERMS = 16          # longer queries: the first 16 distinct tokens
#: A query word is cut to this many characters after folding (folding makes text longer:
#: U+3389 is "kcal"). The longest word of the standard library's documentation has 55.
MAX_WORD_CHARS = 64
MAX_BRIDGES = tuning.MAX_BRIDGES.value
SHORT_TOKEN_CHARS = tuning.SHORT_TOKEN_CHARS.value
AFFIX_CHARS = tuning.AFFIX_CHARS.value

_TOKEN = re.compile(r"[^\W_]+")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def fold(text: str) -> str:
    """Lower case, diacritics removed (as FTS5's unicode61 tokenizer does)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c)).lower()


def every_token(text: str) -> list[str]:
    """Every word token of a query, folded and cut to MAX_WORD_CHARS."""
    return [t[:MAX_WORD_CHARS] for t in _TOKEN.findall(fold(text))]


def tokens(text: str) -> list[str]:
    """Distinct lower-case word tokens, diacritics removed, each cut to MAX_WORD_CHARS."""
    return first_distinct(every_token(text))


def first_distinct(words: list[str]) -> list[str]:
    """The first MAX_TERMS distinct words, in order."""
    return list(dict.fromkeys(words))[:MAX_TERMS]


def text_words(texts: Iterable[str]) -> set[str]:
    """Every token of some texts, as the keyword index cuts them (for the vocabulary)."""
    # a match at a time: one findall over a 32 MiB upload holds the GIL for a second
    return {m.group() for text in texts for m in _TOKEN.finditer(fold(text))}


def edits1(word: str) -> set[str]:
    """Every string one deletion, transposition, replacement or insertion away."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return (deletes | transposes | replaces | inserts) - {word}


def token_shaped(word: str) -> bool:
    """Two characters, or one character repeated: an option letter or a placeholder."""
    return len(word) <= 2 or len(set(word)) == 1


def short_token(word: str, lexicon: WordNet | None = None) -> bool:
    """An option letter, a placeholder, an abbreviation: token-shaped, or a non-English
    token of at most SHORT_TOKEN_CHARS characters. Such tokens mean something only where
    a concept's name holds them."""
    lexicon = lexicon or wordnet()
    return token_shaped(word) or (len(word) <= SHORT_TOKEN_CHARS and lexicon.available
                                  and not (word.isalpha() and lexicon.knows(word)))


@dataclass(frozen=True)
class Vocabulary:
    """The corpus's words, and its words by stem (for word forms)."""

    words: frozenset[str] = frozenset()
    by_stem: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: the words of concepts' names (a short token counts where a name holds it)
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, words: Iterable[str], names: Iterable[str] = ()) -> Vocabulary:
        words = frozenset(words)
        stems: dict[str, list[str]] = defaultdict(list)
        for word in sorted(words):
            stems[stem(word)].append(word)
        return cls(words, {s: tuple(ws) for s, ws in stems.items()}, frozenset(names))

    def with_words(self, new: Iterable[str]) -> Vocabulary:
        """This vocabulary and ``new`` (removed words may linger: a stale word matches
        nothing)."""
        added = set(new) - self.words
        if not added:
            return self
        by_stem = dict(self.by_stem)
        for word in sorted(added):
            by_stem[stem(word)] = (*by_stem.get(stem(word), ()), word)
        return Vocabulary(self.words | added, by_stem, self.names)

    def with_names(self, names: Iterable[str]) -> Vocabulary:
        return Vocabulary(self.words, self.by_stem, frozenset(names))

    def names_holding(self, token: str) -> tuple[str, ...]:
        """Name words that are the token, or end with it after a short prefix (``cwd`` in
        ``getcwd``, ``env`` in ``getenv``; not ``foo`` in ``footer``)."""
        if token in self.names:
            return (token,)
        if token_shaped(token):  # two letters are inside too many words (ss: process)
            return ()
        return tuple(sorted(n for n in self.names if len(n) <= len(token) + AFFIX_CHARS
                            and n.endswith(token)))[:MAX_BRIDGES]

    def __bool__(self) -> bool:
        return bool(self.words)

    def forms(self, word: str) -> tuple[str, ...]:
        """Corpus words sharing the word's stem."""
        return self.by_stem.get(stem(word), ())
