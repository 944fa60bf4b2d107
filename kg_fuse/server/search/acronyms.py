"""Acronyms the corpus defines itself, so a query that spells one out finds its users.

A user who asks for "cyclic redundancy check of some bytes" means ``zlib.crc32``, whose
docstring says only "CRC-32"; the words are elsewhere in the corpus, in a definition
such as "Cyclic Redundancy Check (CRC)" or "CRC (cyclic redundancy check)". Nothing here
is a hand-written glossary: definitions are found in the corpus's own text with the
Schwartz & Hearst rule (2003) and applied to the concepts that use the acronym.

**Finding definitions.** Two shapes, both with parentheses:

- ``long form (SF)``: the short form in parentheses, the long form the words before it
  (at most ``min(len(SF) + 5, 2 * len(SF))`` words);
- ``SF (long form)``: an acronym followed by its long form in parentheses.

The short form must look like an acronym (2-10 characters, a letter first, at least two
capitals). The long form is accepted when the short form's letters can be found in it
in order, from right to left, with its first letter starting a word (Schwartz & Hearst's
matching), and it is cut to the shortest such tail. Each acronym keeps its most frequent
long form (ties: the shortest, then alphabetical, so the choice is deterministic).

**Applying them.** A concept uses an acronym when a word of its name or description is
the acronym, or the acronym followed by digits or a hyphen and digits ("crc32",
"SHA-256", "md5"); its text then gets the long form appended in parentheses, unless it
already contains it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from kg_fuse.server.search import tuning

MIN_SHORT, MAX_SHORT = tuning.ACRONYM_CHARS.value
#: A long form before ``(SF)``: at most ``min(len(SF) + EXTRA, FACTOR * len(SF))`` words.
WINDOW_EXTRA, WINDOW_FACTOR = tuning.ACRONYM_WINDOW.value
EXTRA_WORDS = tuning.ACRONYM_EXTRA_WORDS.value
_PAREN = re.compile(r"\(([^()]{1,120})\)")
_SHORT = re.compile(rf"^[A-Za-z][A-Za-z0-9&/.-]{{{MIN_SHORT - 1},{MAX_SHORT - 1}}}$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")
_PROSE = re.compile(r"^[A-Za-z][A-Za-z-]*(?: [A-Za-z][A-Za-z-]*)+$")
_USE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SENTENCE_BREAK = re.compile(r"[.;:!?]\s|[\n\r]{2,}|--|—")


def looks_like_acronym(text: str) -> bool:
    """2-10 characters, a letter first, no spaces, at least two capitals and more
    capitals than lower-case letters (a plural "s" aside): "CRC", "NaN", "ABCs"."""
    core = text[:-1] if text.endswith("s") else text
    upper = sum(c.isupper() for c in core)
    return bool(_SHORT.match(text)) and upper >= 2 and upper > sum(c.islower() for c in core)


def _letters(short: str) -> str:
    return "".join(c.lower() for c in short if c.isalnum())


def match_long_form(short: str, words: list[str]) -> list[str] | None:
    """The shortest tail of ``words`` that the short form abbreviates, or None.

    Schwartz & Hearst: walk the short form's characters from the last to the first,
    finding each in the long form from the right; the first character must start a word.
    """
    chars = _letters(short)
    if len(chars) < MIN_SHORT or not words:
        return None
    text = " ".join(words).lower()
    s, at = len(chars) - 1, len(text) - 1
    while s >= 0:
        c = chars[s]
        while at >= 0 and (text[at] != c or (s == 0 and at > 0 and text[at - 1].isalnum())):
            at -= 1
        if at < 0:
            return None
        s -= 1
        at -= 1
    start_char = at + 1
    # the words from the one containing start_char
    pos = 0
    for i, w in enumerate(words):
        if pos + len(w) > start_char:
            tail = words[i:]
            return tail if len(tail) >= 2 else None
        pos += len(w) + 1
    return None


def _window(short: str) -> int:
    """How many words before ``(short)`` its long form may have (Schwartz & Hearst)."""
    return min(len(_letters(short)) + WINDOW_EXTRA, WINDOW_FACTOR * len(_letters(short)))


def _clause_before(text: str, end: int) -> str:
    """The text before ``end`` back to the last sentence break (at most 200 characters)."""
    head = text[max(0, end - 200):end]
    breaks = list(_SENTENCE_BREAK.finditer(head))
    return head[breaks[-1].end():] if breaks else head


def definitions(text: str) -> list[tuple[str, str]]:
    """(acronym, long form) pairs defined in ``text``; acronyms upper-cased."""
    found: list[tuple[str, str]] = []
    for m in _PAREN.finditer(text):
        inner = m.group(1).strip()
        first_inner = re.split(r"[\s,;]", inner, maxsplit=1)[0]
        if looks_like_acronym(first_inner) and (first_inner == inner or "," in inner
                                                or ";" in inner):
            pair = _defined_before(text, m.start(), first_inner)
        else:
            pair = _defined_inside(text, m.start(), inner)
        if pair is not None:
            found.append(pair)
    return found


def _defined_before(text: str, start: int, short: str) -> tuple[str, str] | None:
    """"cyclic redundancy check (CRC)": the acronym in the parentheses at ``start``, its
    long form the words before them."""
    words = _WORD.findall(_clause_before(text, start))
    long = match_long_form(short, words[-_window(short):])
    if long and not looks_like_acronym(" ".join(long)):
        return short.upper(), " ".join(long)
    return None


def _defined_inside(text: str, start: int, inner: str) -> tuple[str, str] | None:
    """"CRC (cyclic redundancy check)": the acronym just before the parentheses at
    ``start``, its long form what they hold (``inner``), which must start with the
    acronym's first letter."""
    before = _WORD.findall(_clause_before(text, start))[-2:]
    short = next((w for w in reversed(before) if looks_like_acronym(w)), None)
    head = re.split(r"[,;:]", inner, maxsplit=1)[0].strip()
    if short is None or not _PROSE.match(head):
        return None
    words = head.split()
    if len(words) > _window(short):
        return None
    long = match_long_form(short, words)
    starts = {part[:1].lower() for part in words[0].split("-")}
    if long and _letters(short)[0] in starts and short.lower() not in head.lower():
        return short.upper(), head
    return None


def plausible(short: str, long: str) -> bool:
    """A long form of at most two words more than the acronym has letters, that does
    not contain the acronym itself ("XML declaration" does not define XML)."""
    words = long.lower().split()
    return (len(words) <= len(_letters(short)) + EXTRA_WORDS
            and short.lower() not in re.split(r"[\s-]+", long.lower()))


def build_map(texts: Iterable[str]) -> dict[str, str]:
    """Acronym (lower case) -> its most frequent long form in these texts."""
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    for text in texts:
        for short, long in definitions(text):
            if plausible(short, long):
                seen[short.lower()][long.lower()] += 1
    return {short: min(forms.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))[0]
            for short, forms in seen.items()}


def used(text: str, acronyms: Mapping[str, str]) -> list[str]:
    """The acronyms ``text`` uses, in order of first use ("crc32" and "SHA-256" count)."""
    out: dict[str, None] = {}
    for m in _USE.finditer(text):
        word = m.group(0).lower()
        stem = word.rstrip("0123456789")
        for candidate in (word, stem):
            if candidate in acronyms:
                out[candidate] = None
                break
    return list(out)


def expand(text: str, context: str, acronyms: Mapping[str, str]) -> str:
    """``text`` with the long forms of the acronyms ``context`` uses appended."""
    if not acronyms:
        return text
    lowered = text.lower()
    extra = [acronyms[a] for a in used(context, acronyms) if acronyms[a] not in lowered]
    return f"{text} ({'; '.join(extra)})" if extra else text
