"""Reading a query in the user's words: what each word is in this corpus's words.

Every word of a query (function words left out) is read as one of:

* ``corpus``: the corpus uses it;
* ``form``: the corpus uses another form of it (``bake`` finds ``baking``,
  ``children`` finds ``child``: same Snowball stem, or a WordNet base form);
* ``typo``: one edit from a corpus word (5 to 40 letters, not an English word);
* ``name``: a token too short or too repetitive to mean anything by itself, or a short
  non-English one (``ss``, ``xxx``, ``foo``, ``cwd``, the parts of ``ab-cd``): evidence
  only where a concept's name holds it (``ls``, ``os``, ``re``, ``getcwd``), since
  corpora use such tokens everywhere as options, placeholders and examples;
* ``meaning``: an English word the corpus never uses, read through WordNet: its
  synonyms, the broader terms it is a kind of (``spaghetti`` is a ``pasta``) and
  derived words, as far as this corpus uses them, each weighted below the word itself;
* ``english``: an English word with no such bridge into this corpus;
* ``unknown``: no word of English nor of the corpus (``xkcdq``, ``qwerty``);
* ``number``: digits beside words, looked up as keywords only (``thing 12``).

A query that only repeats its words (``blah blah blah``, ``test test``) is noise: people
test a search box that way.

A word's *unfamiliarity* (0 = the corpus's own word, 1 = unknown) lowers the query's
vector score (:meth:`QueryReading.familiarity`); its *alternatives* are the corpus
words the keyword index looks up for it; its bridges are added to the embedded text.
Spelling alone is never taken for meaning: a typo needs a non-word, and WordNet links
words by meaning only. How text is cut into words and what words the corpus holds:
:mod:`.words`; the bridges WordNet makes into the corpus's words: :mod:`.bridges`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kg_fuse.server.search import tuning
from kg_fuse.server.search.bridges import (
    MIN_WORD_CHARS,
    Bridge,
    base_form_terms,
    meaning_bridges,
)
from kg_fuse.server.search.lexicon import WordNet
from kg_fuse.server.search.words import (
    Vocabulary,
    edits1,
    every_token,
    first_distinct,
    short_token,
)
from kg_fuse.stopwords import STOPWORDS

#: Tuned numbers are read from :mod:`.tuning` (what each is for, what chose it); the
#: limits below them bound cost.
TYPO_MIN_CHARS = 5
#: Longer words get no typo candidates: a word of n letters has about 54 n of them, so
#: the cost of a query's reading stays small and fixed whatever the query holds.
TYPO_MAX_CHARS = 40
TYPO_PENALTY = tuning.TYPO_PENALTY.value
#: How much of the vector score a query loses as its words grow unfamiliar.
UNFAMILIAR_DISCOUNT = tuning.UNFAMILIAR_DISCOUNT.value
#: Unfamiliarity by reading (``meaning`` is 1 - its best bridge's factor).
UNFAMILIARITY = {"corpus": 0.0, "form": 0.0, "typo": TYPO_PENALTY}
#: Whether a concept answers the query at all is weighed word by word. For it: each of
#: the corpus's own words or forms 1, a name token found in its name 1, a typo 0.5, a
#: word read through its meaning the factor of its bridge found there. Against it: a
#: word whose meaning WordNet bridges into the corpus but not here 1, a name token
#: found in other names only 1, a non-word 0.5, an English word with no bridge into
#: the corpus 0.4 (the model may still know it). Where the words against outweigh the
#: words for it, the query is noise at that concept and scores 0 there however its
#: letters embed ("dib dab dob", "--foo"; "cornmeal porridge" still counts).
MISSING_WEIGHT = tuning.MISSING_WEIGHT.value
SUPPORT = tuning.SUPPORT.value
EMBEDDED_BRIDGES = tuning.EMBEDDED_BRIDGES.value
EMBEDDED_VIAS = ("synonym", "broader")  # (a related word may be another sense's)
EMBED_BRIDGES_UP_TO = tuning.EMBED_BRIDGES_UP_TO.value
MIN_FORM_CHARS = tuning.MIN_FORM_CHARS.value


def _judged(token: str) -> bool:
    return len(token) >= 2 and any(c.isalpha() for c in token) and token not in STOPWORDS


def _repeated(words: list[str]) -> list[str]:
    """The query's judged words when every one of them comes twice or more (``blah blah
    blah``, ``test test test``), else none."""
    said = Counter(t for t in words if _judged(t))
    return list(said) if said and min(said.values()) >= 2 else []


@dataclass(frozen=True)
class WordReading:
    word: str
    kind: str
    alternatives: tuple[Bridge, ...] = ()


@dataclass(frozen=True)
class QueryReading:
    """Each judged word of a query, read against one corpus."""

    words: tuple[WordReading, ...]
    judged: bool = True  # False when there is no corpus to judge against
    repeated: tuple[str, ...] = ()  # words said over and over: the query is noise

    def familiarity(self, bridged: Mapping[int, float] | None = None) -> float:
        """The factor a concept's vector score is multiplied by, given which words read
        through WordNet or by a name have their bridge in its text (``bridged``: word
        position -> the best such bridge's factor; ``None``: every word at its best).

        The corpus's own words (and forms, typos) count everywhere; a word read through
        its meaning or a name counts where its bridge occurs, and is unknown elsewhere.
        1 for the corpus's own words, lower as they grow unfamiliar; 0 where the words
        against the concept outweigh those for it (:data:`MISSING_WEIGHT`), and for a
        query without words: its cosines there are where the model happens to put
        random letters or unrelated words.
        """
        if not self.judged:
            return 1.0
        judged = [(i, w) for i, w in enumerate(self.words) if w.kind != "number"]
        if not judged or self.repeated:
            return 0.0
        unfamiliar = [_unfamiliarity(word, position, bridged) for position, word in judged]
        if _outweighed([word for _, word in judged], unfamiliar):
            return 0.0
        return 1.0 - UNFAMILIAR_DISCOUNT * _mean(unfamiliar)

    def unknown_words(self) -> list[str]:
        """Words with no bridge into the corpus (what to rephrase)."""
        return [w.word for w in self.words if w.kind in ("english", "unknown")]

    def expansions(self) -> dict[str, list[str]]:
        """Query word -> the corpus words it was read as (forms, typos, meanings), as
        far as a person would accept them (``Bridge.shown``)."""
        shown = {w.word: [b.term for b in w.alternatives if b.shown] for w in self.words
                 if w.kind not in ("corpus", "name", "number")}
        return {word: terms for word, terms in shown.items() if terms}

    def embedded_text(self, query: str) -> str:
        """The text to embed: the query, followed by the meanings WordNet gave its
        unfamiliar words (``spaghetti`` -> ``spaghetti (pasta)``), so the model reads
        them in the corpus's words too."""
        if len([w for w in self.words if w.kind != "number"]) > EMBED_BRIDGES_UP_TO:
            return query  # a longer query gives the model its own context
        extra = [b.term for w in self.words if w.kind == "meaning"
                 for b in [b for b in w.alternatives if b.via in EMBEDDED_VIAS][
                     :EMBEDDED_BRIDGES]]
        return f"{query} ({', '.join(dict.fromkeys(extra))})" if extra else query


def _unfamiliarity(word: WordReading, position: int,
                   bridged: Mapping[int, float] | None) -> float | None:
    """How unfamiliar the word is at a concept (:meth:`QueryReading.familiarity`); None
    where it has no evidence there (a meaning or a name whose bridge it lacks, a word
    the corpus does not use)."""
    if word.kind in UNFAMILIARITY:
        return UNFAMILIARITY[word.kind]
    if word.kind in ("meaning", "name") and word.alternatives and (
            bridged is None or position in bridged):
        factor = (max(b.factor for b in word.alternatives) if bridged is None
                  else bridged[position])
        return 1.0 - factor
    return None


def _mean(unfamiliar: list[float | None]) -> float:
    """The words' mean unfamiliarity, a word without evidence wholly unfamiliar."""
    return sum(1.0 if u is None else u for u in unfamiliar) / len(unfamiliar)


def _outweighed(words: list[WordReading], unfamiliar: list[float | None]) -> bool:
    """Whether the words against a concept outweigh those for it, or none is for it."""
    support = against = 0.0
    for word, u in zip(words, unfamiliar, strict=True):
        if u is None:
            against += MISSING_WEIGHT[word.kind]
        elif word.kind == "meaning":
            support += 1.0 - u  # the factor of its bridge here
        else:
            support += SUPPORT[word.kind]
    return against > support or support == 0


def read_word(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> WordReading:
    """How the corpus can understand one query word (see the module docstring)."""
    if short_token(word, lexicon):  # only names tell
        if word not in vocabulary.words:
            return WordReading(word, "unknown")
        # in the corpus: evidence where a name holds it, against the concept elsewhere
        return WordReading(word, "name", tuple(Bridge(n, 1.0, "name")
                                               for n in vocabulary.names_holding(word)))
    return _read_word(word, vocabulary, lexicon)


def _read_word(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> WordReading:
    """The first reading that applies (:data:`READINGS`), else unknown."""
    for reading in READINGS:
        found = reading(word, vocabulary, lexicon)
        if found is not None:
            return found
    return WordReading(word, "unknown")


def _as_corpus_word(word: str, vocabulary: Vocabulary, lexicon: WordNet
                    ) -> WordReading | None:
    if word in vocabulary.words:
        return WordReading(word, "corpus", (Bridge(word, 1.0, "corpus"),))
    return None


def _as_form(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> WordReading | None:
    """Another form of corpus words (its stem's, or a WordNet base form's)."""
    forms = [] if len(word) < MIN_FORM_CHARS else (
        list(vocabulary.forms(word)) or base_form_terms(word, vocabulary, lexicon))
    if forms:
        return WordReading(word, "form", tuple(Bridge(t, 1.0, "form") for t in forms))
    return None


def _as_english(word: str, vocabulary: Vocabulary, lexicon: WordNet
                ) -> WordReading | None:
    """An English word: read through its meanings, or known but bridging to nothing."""
    if not (len(word) >= MIN_WORD_CHARS and word.isalpha() and lexicon.knows(word)):
        return None
    bridges = meaning_bridges(word, vocabulary, lexicon)
    return WordReading(word, "meaning", tuple(bridges)) if bridges else WordReading(
        word, "english")


def _as_typo(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> WordReading | None:
    """One edit away from corpus words."""
    if not (TYPO_MIN_CHARS <= len(word) <= TYPO_MAX_CHARS and word.isalpha()
            and word.isascii()):
        return None
    near = sorted(edits1(word) & vocabulary.words)
    return WordReading(word, "typo", tuple(Bridge(t, TYPO_PENALTY, "typo") for t in near)
                       ) if near else None


#: How a word the corpus does not hold as a short token is read: the first that applies.
READINGS: tuple[Callable[[str, Vocabulary, WordNet], WordReading | None], ...] = (
    _as_corpus_word, _as_form, _as_english, _as_typo)


def read_query(query: str, vocabulary: Vocabulary, lexicon: WordNet) -> QueryReading:
    """Every judged word of the query, read against this corpus (no corpus: no
    judgement)."""
    if not vocabulary:
        return QueryReading((), judged=False)
    said = every_token(query)  # folded once: folding a long query is most of its reading
    distinct = first_distinct(said)
    words = [read_word(w, vocabulary, lexicon) for w in distinct if _judged(w)]
    if words:  # numbers count as keywords beside words ("thing 12"), never alone
        words += [WordReading(t, "number", (Bridge(t, 1.0, "corpus"),)) for t in distinct
                  if t.isdigit() and len(t) >= 2 and t in vocabulary.words]
    return QueryReading(tuple(words), repeated=tuple(_repeated(said)))
