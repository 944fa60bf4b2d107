"""WordNet's bridges from a query word into the corpus's words.

An English word the corpus never uses may still mean something it does: ``spaghetti``
is a ``pasta``, ``omelet`` is spelled ``omelette`` here, ``loaf`` is ``bread``. A
:class:`Bridge` is one such corpus word and the share of the query word it carries, by
relation: synonyms, broader terms (one and two steps up), derived and similar words,
and the specific words of the first meaning's definition, each less for a less frequent
meaning. Only the words this corpus uses are kept. WordNet links words by meaning only,
so no bridge is made from spelling. :mod:`.understand` decides which words are read
this way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kg_fuse.server.search import tuning
from kg_fuse.server.search.lexicon import POS_FILES, Synset, WordNet
from kg_fuse.server.search.words import MAX_BRIDGES, Vocabulary, tokens
from kg_fuse.stopwords import STOPWORDS

#: What a bridge carries of the word's weight, by relation.
BRIDGE_FACTORS = tuning.BRIDGE_FACTORS.value
MULTIWORD_FACTOR = tuning.MULTIWORD_FACTOR.value
#: The readings ``words read as`` shows (a display rule: the search weighs them all).
#: Chosen by reading every reading of the everyday sets' words: a definition's words
#: (``cauliflower -> crowded``) and related senses' (``coin -> flock``) read as
#: mistakes, and below 0.4 only distant classes remain (``spaghetti -> food``).
SHOWN_VIAS = ("corpus", "form", "typo", "name", "synonym", "broader")
SHOWN_MIN_FACTOR = tuning.SHOWN_MIN_FACTOR.value
SENSES = tuning.SENSES.value
SENSE_DECAY = tuning.SENSE_DECAY.value
MIN_WORD_CHARS = tuning.MIN_WORD_CHARS.value
#: A definition's word bridges only when it names a thing or an action, and a specific
#: one: at most this many meanings in all ("omelet", "fried"; not "form", "large").
GLOSS_MAX_SENSES = tuning.GLOSS_MAX_SENSES.value

#: WordNet's pointers to a broader meaning (hypernym, instance hypernym), and to related
#: ones (derivationally related, similar to, pertainym).
BROADER_POINTERS = ("@", "@i")
RELATED_POINTERS = ("+", "&", "\\")


@dataclass(frozen=True)
class Bridge:
    """A corpus word standing for a query word, and how much of it it carries
    (``via="name"``: only where a concept's name holds it). ``literal``: the corpus
    word is WordNet's word itself, not another word sharing its stem (``goods`` of
    "baked goods" is the corpus's ``good`` only by its stem)."""

    term: str
    factor: float
    via: str
    literal: bool = True

    @property
    def shown(self) -> bool:
        """Whether a person would accept it as a reading of the word: another form, a
        typo's fix, a synonym or what the word is (``spaghetti -> pasta, dish``), and
        WordNet's own word; not a word of its definition, of a related sense, of a
        distant class (``cupcakes -> good``) or one that only shares a stem."""
        return self.via in SHOWN_VIAS and self.factor >= SHOWN_MIN_FACTOR and self.literal


def meaning_bridges(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> list[Bridge]:
    """Corpus words WordNet relates to ``word``, best first (at most MAX_BRIDGES)."""
    found: dict[str, Bridge] = {}

    def offer(lemmas: Iterable[str], factor: float, via: str) -> None:
        _offer(found, word, lemmas, factor, via, vocabulary, lexicon)

    tagged = {pos: lexicon.tagged_senses(word, pos) for pos in POS_FILES}
    for pos in POS_FILES:
        for rank, synset in enumerate(_senses(word, pos, tagged, lexicon)[:SENSES]):
            _offer_meaning(offer, synset, rank, lexicon)
    rank = {via: i for i, via in enumerate(BRIDGE_FACTORS)}
    return sorted(found.values(), key=lambda b: (-b.factor, rank[b.via], b.term)
                  )[:MAX_BRIDGES]


def _senses(word: str, pos: str, tagged: Mapping[str, int], lexicon: WordNet
            ) -> list[Synset]:
    """The word's meanings as this part of speech, most frequent first.

    An abbreviation's meaning (NIH; thirty as a numeral) is not the word's: a query word
    that happens to spell one bridges to the agency, not to what the user meant. Nor
    are meanings the tagged texts never use, when they use any."""
    senses = [s for s in lexicon.synsets(word, pos) if word not in s.acronyms]
    if any(tagged.values()):
        senses = senses[:tagged[pos]]
    return senses


def _offer_meaning(offer: Callable[[Iterable[str], float, str], None], synset: Synset,
                   rank: int, lexicon: WordNet) -> None:
    """One meaning's bridges: its words, its definition's (the first meaning only:
    "frittata: an omelet with ..."), the broader meanings two steps up, related ones;
    each meaning after the first counts less (SENSE_DECAY)."""
    decay = SENSE_DECAY ** rank
    offer(synset.words, BRIDGE_FACTORS["synonym"] * decay, "synonym")
    if rank == 0:
        definition = synset.gloss.split('; "')[0]
        offer([t for t in tokens(definition) if _specific(t, lexicon)],
              BRIDGE_FACTORS["gloss"], "gloss")
    for symbol, offset, target_pos in synset.pointers:
        if symbol in BROADER_POINTERS:
            broader = lexicon.synset(target_pos, offset)
            offer(broader.words, BRIDGE_FACTORS["broader"] * decay, "broader")
            for s2, o2, p2 in broader.pointers:
                if s2 in BROADER_POINTERS:
                    offer(lexicon.synset(p2, o2).words,
                          BRIDGE_FACTORS["broader2"] * decay, "broader")
        elif symbol in RELATED_POINTERS:
            offer(lexicon.synset(target_pos, offset).words,
                  BRIDGE_FACTORS["related"] * decay, "related")


def _offer(found: dict[str, Bridge], word: str, lemmas: Iterable[str], factor: float,
           via: str, vocabulary: Vocabulary, lexicon: WordNet) -> None:
    """Keep in ``found`` the corpus words standing for WordNet's ``lemmas``, at ``factor``
    (less for a word out of a multi-word name), each at its best factor so far."""
    for lemma in lemmas:
        parts = lemma.split("_")
        weight = factor if len(parts) == 1 else factor * MULTIWORD_FACTOR
        for part in parts:
            if not _bridging(part, word, len(parts) > 1, lexicon):
                continue
            terms, literal = _corpus_terms(part, len(parts) == 1, vocabulary, lexicon)
            for term in terms:
                if term not in found or found[term].factor < weight:
                    found[term] = Bridge(term, round(weight, 3), via, literal)


def _bridging(part: str, word: str, multiword: bool, lexicon: WordNet) -> bool:
    """Whether a word of WordNet's may stand for the query ``word``: not the word itself,
    a stop word, a short or non-alphabetic token; out of a multi-word name, only a
    specific one ("loaf of bread": bread; "hang around": nothing)."""
    if part == word or part in STOPWORDS or len(part) < MIN_WORD_CHARS \
            or not part.isalpha():
        return False
    return not multiword or _specific(part, lexicon)


def _corpus_terms(part: str, single: bool, vocabulary: Vocabulary, lexicon: WordNet
                  ) -> tuple[tuple[str, ...], bool]:
    """The corpus words standing for a word of WordNet's, and whether they are that word
    itself (``literal``) rather than words sharing its stem. A single word the corpus
    spells otherwise is found by its synonyms (omelette)."""
    if part in vocabulary.words:
        return (part,), True
    terms = vocabulary.forms(part)
    if not terms and single:
        return _synonyms_in(part, vocabulary, lexicon), True
    return terms, False


def _synonyms_in(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> tuple[str, ...]:
    """Corpus words among the synonyms of the word's most frequent noun meaning."""
    senses = lexicon.synsets(word, "n")[:1]
    return tuple(w for s in senses for w in s.words if w != word and w in vocabulary.words)


def _specific(word: str, lexicon: WordNet) -> bool:
    """A thing or an action, and a specific one (few meanings in all): ``omelet``,
    ``fried``; not ``form``, ``give``, ``large`` or ``gently``."""
    senses = lexicon.sense_counts(word) if word.isalpha() else {}
    return ("n" in senses or "v" in senses) and sum(senses.values()) <= GLOSS_MAX_SENSES


def base_form_terms(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> list[str]:
    """Corpus words sharing a stem with one of the word's WordNet base forms (irregular
    forms the stemmer misses: ``children`` -> ``child``)."""
    terms: list[str] = []
    for pos in POS_FILES:
        for base in lexicon.base_forms(word, pos) if lexicon.available else ():
            terms += vocabulary.forms(base)
    return list(dict.fromkeys(terms))
