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
words by meaning only.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kg_fuse.server.search import tuning
from kg_fuse.server.search.lexicon import POS_FILES, Synset, WordNet, stem, wordnet

#: Tuned numbers are read from :mod:`.tuning` (what each is for, what chose it); the
#: limits below them bound cost.
MAX_TERMS = 16          # longer queries: the first 16 distinct tokens
#: A query word is cut to this many characters after folding (folding makes text longer:
#: U+3389 is "kcal"). The longest word of the standard library's documentation has 55.
MAX_WORD_CHARS = 64
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
MAX_BRIDGES = tuning.MAX_BRIDGES.value
EMBEDDED_BRIDGES = tuning.EMBEDDED_BRIDGES.value
EMBEDDED_VIAS = ("synonym", "broader")  # (a related word may be another sense's)
EMBED_BRIDGES_UP_TO = tuning.EMBED_BRIDGES_UP_TO.value
MIN_WORD_CHARS = tuning.MIN_WORD_CHARS.value
MIN_FORM_CHARS = tuning.MIN_FORM_CHARS.value
SHORT_TOKEN_CHARS = tuning.SHORT_TOKEN_CHARS.value
AFFIX_CHARS = tuning.AFFIX_CHARS.value
#: A definition's word bridges only when it names a thing or an action, and a specific
#: one: at most this many meanings in all ("omelet", "fried"; not "form", "large").
GLOSS_MAX_SENSES = tuning.GLOSS_MAX_SENSES.value

_TOKEN = re.compile(r"[^\W_]+")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: English function words (the Snowball stop list): whether a corpus happens to use
#: "why" or "my" says nothing about whether a query is about its subject.
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


def fold(text: str) -> str:
    """Lower case, diacritics removed (as FTS5's unicode61 tokenizer does)."""
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c)).lower()


def _words(text: str) -> list[str]:
    """Every word token of a query, folded and cut to MAX_WORD_CHARS."""
    return [t[:MAX_WORD_CHARS] for t in _TOKEN.findall(fold(text))]


def tokens(text: str) -> list[str]:
    """Distinct lower-case word tokens, diacritics removed, each cut to MAX_WORD_CHARS."""
    return _distinct(_words(text))


def _distinct(words: list[str]) -> list[str]:
    return list(dict.fromkeys(words))[:MAX_TERMS]


def text_words(texts: Iterable[str]) -> set[str]:
    """Every token of some texts, as the keyword index cuts them (for the vocabulary)."""
    # a match at a time: one findall over a 32 MiB upload holds the GIL for a second
    return {m.group() for text in texts for m in _TOKEN.finditer(fold(text))}


def _judged(token: str) -> bool:
    return len(token) >= 2 and any(c.isalpha() for c in token) and token not in STOPWORDS


def _repeated(words: list[str]) -> list[str]:
    """The query's judged words when every one of them comes twice or more (``blah blah
    blah``, ``test test test``), else none."""
    said = Counter(t for t in words if _judged(t))
    return list(said) if said and min(said.values()) >= 2 else []


def edits1(word: str) -> set[str]:
    """Every string one deletion, transposition, replacement or insertion away."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    transposes = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    inserts = {a + c + b for a, b in splits for c in _LETTERS}
    return (deletes | transposes | replaces | inserts) - {word}


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


#: WordNet's pointers to a broader meaning (hypernym, instance hypernym), and to related
#: ones (derivationally related, similar to, pertainym).
BROADER_POINTERS = ("@", "@i")
RELATED_POINTERS = ("+", "&", "\\")


def _bridges(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> list[Bridge]:
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


def _base_form_terms(word: str, vocabulary: Vocabulary, lexicon: WordNet) -> list[str]:
    """Corpus words sharing a stem with one of the word's WordNet base forms (irregular
    forms the stemmer misses: ``children`` -> ``child``)."""
    terms: list[str] = []
    for pos in POS_FILES:
        for base in lexicon.base_forms(word, pos) if lexicon.available else ():
            terms += vocabulary.forms(base)
    return list(dict.fromkeys(terms))


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
        list(vocabulary.forms(word)) or _base_form_terms(word, vocabulary, lexicon))
    if forms:
        return WordReading(word, "form", tuple(Bridge(t, 1.0, "form") for t in forms))
    return None


def _as_english(word: str, vocabulary: Vocabulary, lexicon: WordNet
                ) -> WordReading | None:
    """An English word: read through its meanings, or known but bridging to nothing."""
    if not (len(word) >= MIN_WORD_CHARS and word.isalpha() and lexicon.knows(word)):
        return None
    bridges = _bridges(word, vocabulary, lexicon)
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
    said = _words(query)  # folded once: folding a long query is most of its reading
    distinct = _distinct(said)
    words = [read_word(w, vocabulary, lexicon) for w in distinct if _judged(w)]
    if words:  # numbers count as keywords beside words ("thing 12"), never alone
        words += [WordReading(t, "number", (Bridge(t, 1.0, "corpus"),)) for t in distinct
                  if t.isdigit() and len(t) >= 2 and t in vocabulary.words]
    return QueryReading(tuple(words), repeated=tuple(_repeated(said)))
