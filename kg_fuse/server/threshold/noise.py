"""The noise a calibration measures: seeded queries of every shape a user might type.

Short 3-5 letter tokens, consonant runs, keyboard mashes, long pronounceable nonsense,
digits and punctuation, random-letter words, single nonsense words, everyday words that
mean nothing together, and token shapes that corpora contain: option letters (``-ss``),
placeholders (``xxx``) and hyphen- or underscore-joined runs, and an everyday word said
over and over (``meow meow``). How many letters a token has defines its shape, so those
numbers live here with their generators, not in the tuning table.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

from kg_fuse.server.search import tuning
from kg_fuse.server.search.words import short_token, tokens

PER_SHAPE = tuning.NOISE_PER_SHAPE.value
GIBBERISH_SEED = tuning.GIBBERISH_SEED.value

KEYBOARD_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm", "1234567890")
KEYBOARD_MASHES: tuple[str, ...] = (
    "asdfgh qwerty zxcvb", "qwertyuiop", "zxcv bnm", "asdf jkl", "hjkl yuiop ghjk",
)
_VOWELS = "aeiou"
_CONSONANTS = "bcdfghjklmnpqrstvwxz"
_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_PUNCT = "!?#@$%&*()[]{}<>/\\|~^+=-_.,;:'\""


def _short_tokens(rng: random.Random) -> str:
    return " ".join("".join(rng.choice(_LETTERS) for _ in range(rng.randint(3, 5)))
                    for _ in range(rng.randint(1, 3)))


def _consonant_runs(rng: random.Random) -> str:
    return " ".join("".join(rng.choice(_CONSONANTS) for _ in range(rng.randint(3, 9)))
                    for _ in range(rng.randint(1, 4)))


def _keyboard_mash(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(1, 4)):
        row = rng.choice(KEYBOARD_ROWS[:3])
        start = rng.randint(0, len(row) - 3)
        word = row[start:start + rng.randint(3, len(row) - start)]
        words.append(word[::-1] if rng.random() < 0.3 else word)
    return " ".join(words)


def _nonsense_word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) +
                   (rng.choice(_CONSONANTS) if rng.random() < 0.4 else "")
                   for _ in range(syllables))


def _long_nonsense(rng: random.Random) -> str:
    return " ".join(_nonsense_word(rng, rng.randint(3, 6)) for _ in range(rng.randint(1, 8)))


def _single_word(rng: random.Random) -> str:
    return _nonsense_word(rng, rng.randint(2, 4))


#: Everyday words for nonsense sentences: what a user types who writes real words that
#: mean nothing together. Far from any corpus's subject by choice (no computing, no
#: cooking), and not the evaluation's own nonsense words.
_EVERYDAY = """
giraffe meadow violin candle harbour tulip pebble castle dolphin lantern feather canyon
glacier saddle compass balloon penguin orchard tambourine scarecrow parrot volcano
marble ribbon anchor comet lagoon walrus kite banjo hedgehog chimney tornado emerald
crimson golden fuzzy gentle sleepy brave noisy ancient hollow tiny enormous shiny lazy
curious polite dusty frozen wobbly dances jumps giggles wanders dreams sneezes paints
juggles tiptoes climbs swims hums borrows forgets gallops knits yawns
"""
EVERYDAY_WORDS: tuple[str, ...] = tuple(_EVERYDAY.split())
GLUE_WORDS = ("the", "a", "with", "under", "beyond", "of", "and", "near", "into", "over")


def _everyday_nonsense(rng: random.Random) -> str:
    words = [rng.choice(EVERYDAY_WORDS) for _ in range(rng.randint(3, 7))]
    words.insert(rng.randint(1, len(words) - 1), rng.choice(GLUE_WORDS))
    return " ".join(words)


def _digits_punctuation(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        alphabet = rng.choice(("0123456789", _PUNCT, "0123456789" + _PUNCT + "xX."))
        parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8))))
    return " ".join(parts)


def _random_letters(rng: random.Random) -> str:
    return " ".join("".join(rng.choice(_LETTERS) for _ in range(rng.randint(3, 8)))
                    for _ in range(rng.randint(2, 8)))


def _option_letters(rng: random.Random) -> str:
    """Command-line options typed alone: ``-ss``, ``-xvf``, ``--qz``."""
    def option() -> str:
        letters = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 3)))
        return rng.choice(("-", "-", "--")) + (letters * 2 if len(letters) == 1 else letters)
    return " ".join(option() for _ in range(rng.randint(1, 2)))


def _placeholders(rng: random.Random) -> str:
    """Placeholder tokens: one letter repeated (``xxx``, ``zzzz``)."""
    return " ".join(rng.choice(_LETTERS) * rng.randint(2, 4) for _ in range(rng.randint(1, 3)))


def _joined_runs(rng: random.Random) -> str:
    """Short tokens joined by hyphens or underscores (``qx-zv-kr``, ``foo_bar_baz``)."""
    joiner = rng.choice("-_")
    return joiner.join("".join(rng.choice(_LETTERS) for _ in range(rng.randint(2, 4)))
                       for _ in range(rng.randint(2, 4)))


def _repeated_words(rng: random.Random) -> str:
    """A word said over and over, as people test a search box (``meow meow``)."""
    return " ".join([rng.choice(EVERYDAY_WORDS)] * rng.randint(2, 3))


NOISE_SHAPES: dict[str, Callable[[random.Random], str]] = {
    "short tokens": _short_tokens, "consonant runs": _consonant_runs,
    "keyboard mashes": _keyboard_mash, "long nonsense": _long_nonsense,
    "single nonsense words": _single_word, "digits and punctuation": _digits_punctuation,
    "random letters": _random_letters, "everyday nonsense": _everyday_nonsense,
    "option letters": _option_letters, "placeholders": _placeholders,
    "joined runs": _joined_runs, "repeated words": _repeated_words,
}


#: Shapes sampled more than PER_SHAPE times: real words that mean nothing together vary
#: more in score than random letters do (some words happen to be near a concept).
SAMPLES = tuning.NOISE_SAMPLES.value


def gibberish_queries(per_shape: int = PER_SHAPE, seed: int = GIBBERISH_SEED
                      ) -> list[tuple[str, str]]:
    """(shape, query) pairs: ``per_shape`` seeded queries of every shape, plus mashes."""
    rng = random.Random(seed)
    out = [(shape, make(rng)) for shape, make in NOISE_SHAPES.items()
           for _ in range(per_shape * SAMPLES.get(shape, 1))]
    out += [("keyboard mashes", q) for q in KEYBOARD_MASHES]
    return list(dict.fromkeys(out))




def not_naming(noise: list[tuple[str, str]], labels: Iterable[str]
               ) -> list[tuple[str, str]]:
    """The noise queries left when those naming a concept are dropped: a random short
    token that is a word of a concept's name (``-re``, ``-uu``, ``grp_nek_cy`` over the
    standard library) is a query for it, not noise (short tokens count only in names:
    :mod:`kg_fuse.server.search.understand`)."""
    names = {t for label in labels for t in tokens(label) if short_token(t)}
    return [(shape, q) for shape, q in noise
            if not any(short_token(t) and t in names for t in tokens(q))]
