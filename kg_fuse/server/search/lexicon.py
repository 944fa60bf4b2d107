"""Knowledge of English for queries: word forms and WordNet's synonyms and hypernyms.

A user asks in their own words; the corpus uses others. Two kinds of knowledge bridge
them without guessing from spelling:

* **word forms**: a Snowball (Porter 2) stem plus WordNet's base forms, which also know
  the irregular ones (``children`` -> ``child``, ``ran`` -> ``run``);
* **meaning**: WordNet, the lexical database, read from its own database files (Debian's
  ``wordnet-base``: ``index.*``, ``data.*``, ``*.exc``). Those files are sorted and
  addressed by byte offset, so a word is found through a sparse index of each sorted
  file (one line's key per 4 KiB, 135 KiB in all, read at its first lookup) and one
  positioned read; nothing else is loaded into memory.

Why not nltk's ``WordNetCorpusReader`` over the same files: measured with
``scripts/bench_wordnet.py`` (fresh interpreters, rounds interleaved, the 1,097 words of
the eval sets; medians of two runs of 2 rounds on a shared two-core machine), it opens
the database in 1.8-2.0 s against 0.045-0.050 s here (36-44x), holds 209 MiB resident
once open against 22 MiB (9.6x; it reads every index into dictionaries up front), and
after the lookups 238 against 36.5 MiB, of which 193 against 29.6 MiB are the process's
own memory rather than file pages (62 MiB with the files memory-mapped); its lookups
take 5-6x as long (0.95 against 0.16-0.19 s; 1.8x before the sparse index, whose
binary search took 0.53 s; the sparse index adds 0.2 MiB). Nor does
it read Debian's files as they are: it needs a ``lexnames`` file the package lacks,
files inside a folder listed in ``nltk.data.path`` (it refuses links to them), and,
unless told otherwise, nltk's own downloaded WordNet to map its senses onto. Its
lookups found the same meanings but 18 of 6,805 (its morphy differs).

Without the database files the lexicon is empty (:attr:`WordNet.available` is false):
searches then work on word forms alone, the server says so (its log, ``kg-fuse server
status``) and the calibration holds the default at a safe floor
(:mod:`kg_fuse.server.threshold.calibrate`).
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

import snowballstemmer

from kg_fuse.server.search import tuning

log = logging.getLogger(__name__)

#: Where WordNet's database files are looked for (``KG_WORDNET_DIR`` first).
WORDNET_DIRS = ("/usr/share/wordnet", "/usr/local/share/wordnet",
                "/usr/share/wordnet/dict", "/opt/homebrew/share/wordnet/dict")
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
#: WordNet's detachment rules (morphy): inflected ending -> base ending, per part of speech.
DETACH = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
          ("shes", "sh"), ("men", "man"), ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
#: Pointer symbols followed for expansion: hypernyms (a spaghetti is a pasta), instance
#: hypernyms, derivationally related forms (compress -> compression), adjective
#: similarity, and pertainyms (adverb -> its adjective).
HYPERNYMS = ("@", "@i")
RELATED = ("+", "&", "\\")

#: Which stemmer made a stem: stems kept in a store are used only if it is this one.
STEMMER = f"snowballstemmer-{version('snowballstemmer')}-english"
CACHED_STEMS = 65536
_stemmer = snowballstemmer.stemmer("english")
_stemmer_lock = threading.Lock()  # the stemmer keeps the word in itself while it works
_stems: dict[str, str] = {}


def stem(word: str) -> str:
    """The Snowball English stem of a lower-case word (cached: the corpus's words and
    the queries' are looked up again and again)."""
    found = _stems.get(word)
    if found is None:
        with _stemmer_lock:
            found = _stemmer.stemWord(word)
        if len(_stems) < CACHED_STEMS:
            _stems[word] = found
    return found


def known_stems(stems: Mapping[str, str]) -> None:
    """Take stems this :data:`STEMMER` made before (a store keeps its corpus's)."""
    for word, found in stems.items():
        if len(_stems) >= CACHED_STEMS:
            break
        _stems.setdefault(word, found)


@dataclass(frozen=True)
class Synset:
    """One meaning: its words, its pointers (symbol, offset, pos) and its gloss."""

    pos: str
    offset: int
    words: tuple[str, ...]
    pointers: tuple[tuple[str, int, str], ...]
    gloss: str
    acronyms: frozenset[str] = frozenset()  # its words written in capitals (NIH)


class _SortedLines:
    """A sorted text file searched by its first field, read with ``os.pread``.

    A lookup reads a few KiB; they stay in the page cache rather than in the server's
    resident set, which a memory map of the files grew by about 8 MiB over 60 searches
    (``/proc/PID/smaps``: index.noun 4.0 MiB, data.noun 2.6 MiB). ``pread`` keeps no
    file position, so threads share the descriptor safely.

    :meth:`find` goes through a sparse index kept in memory: the first field and start
    of the first whole line at or after every :attr:`BLOCK` bytes (1,539 entries, 135
    KiB, for WordNet's four index files), so a lookup is a bisect, one read of a block
    and a search of it for the key's line (2.6 against 25 us): not a binary search of
    some 17 reads, each a turn of a Python loop under the GIL.
    """

    PIECE = 4096
    BLOCK = 4096

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.size = os.fstat(self.fd).st_size
        self._sparse: tuple[list[bytes], list[int]] | None = None
        self._building = threading.Lock()

    def _line_from(self, pos: int) -> bytes:
        """The text from ``pos`` to the end of its line."""
        parts = []
        while pos < self.size:
            piece = os.pread(self.fd, self.PIECE, pos)
            if not piece:
                break
            nl = piece.find(b"\n")
            if nl >= 0:
                parts.append(piece[:nl])
                break
            parts.append(piece)
            pos += len(piece)
        return b"".join(parts)

    def line_at(self, pos: int) -> tuple[int, bytes]:
        """The start and text of the first whole line starting at or after ``pos``."""
        if pos > 0:
            before = pos - 1
            piece = os.pread(self.fd, self.PIECE, before)
            nl = piece.find(b"\n")
            if nl < 0:  # a line longer than a piece: read on
                pos = min(self.size, before + len(self._line_from(before)) + 1)
            else:
                pos = before + nl + 1
                end = piece.find(b"\n", nl + 1)
                if end >= 0:  # the whole next line is in this piece
                    return pos, piece[nl + 1:end]
        return pos, self._line_from(pos)

    def sparse_index(self) -> tuple[list[bytes], list[int]]:
        """The first fields and starts of the first whole line at or after every
        :attr:`BLOCK` bytes, ascending (read in one pass at the first lookup)."""
        if self._sparse is None:
            with self._building:
                if self._sparse is None:
                    keys: list[bytes] = []
                    starts: list[int] = []
                    for pos in range(0, self.size, self.BLOCK):
                        start, line = self.line_at(pos)
                        if start < self.size and (not starts or start > starts[-1]):
                            keys.append(line.split(b" ", 1)[0])
                            starts.append(start)
                    self._sparse = keys, starts
        return self._sparse

    def find(self, key: str) -> bytes | None:
        """The line whose first field is ``key`` (the files sort bytewise; the licence
        header's lines start with spaces, so their first field sorts first)."""
        if not key or " " in key or "\n" in key or not key.isascii():
            return None
        want = key.encode()
        keys, starts = self.sparse_index()
        i = bisect.bisect_right(keys, want) - 1
        if i < 0:
            return None
        end = starts[i + 1] if i + 1 < len(starts) else self.size
        text = b"\n" + os.pread(self.fd, end - starts[i], starts[i]) + b"\n"
        head = b"\n" + want
        at = text.find(head)  # one scan of the block, for most words
        if at >= 0 and text[at + len(head)] not in b" \n":  # a longer word: read on
            spaced = text.find(head + b" ", at)
            at = spaced if spaced >= 0 else text.find(head + b"\n", at)  # the key alone
        return None if at < 0 else text[at + 1:text.index(b"\n", at + 1)]

    def read_at(self, offset: int) -> bytes:
        return self._line_from(offset)


class WordNet:
    """Read-only WordNet over its database files; a lookup is a bisect in memory and a
    read of the block it names."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._index: dict[str, _SortedLines] = {}
        self._data: dict[str, _SortedLines] = {}
        self._exceptions: dict[str, dict[str, tuple[str, ...]]] = {}
        if root is None:
            return
        for pos, name in POS_FILES.items():
            self._index[pos] = _SortedLines(root / f"index.{name}")
            self._data[pos] = _SortedLines(root / f"data.{name}")
            exc: dict[str, tuple[str, ...]] = {}
            exc_path = root / f"{name}.exc"
            if exc_path.exists():
                for line in exc_path.read_text(encoding="latin-1").splitlines():
                    inflected, *bases = line.split()
                    exc[inflected] = tuple(bases)
            self._exceptions[pos] = exc

    @property
    def available(self) -> bool:
        return bool(self._index)

    def base_forms(self, word: str, pos: str) -> list[str]:
        """The word's dictionary forms in this part of speech (WordNet's morphy)."""
        return [form for form, _ in self._entries(word, pos)]

    def _entries(self, word: str, pos: str) -> list[tuple[str, bytes]]:
        """The word's dictionary forms in this part of speech with their index lines."""
        candidates = [word, *self._exceptions.get(pos, {}).get(word, ())]
        candidates += [word[: -len(old)] + new for old, new in DETACH[pos]
                       if word.endswith(old) and len(word) > len(old) + 1]
        index = self._index[pos]
        return [(c, line) for c in dict.fromkeys(candidates)
                if (line := index.find(c)) is not None]

    @lru_cache(maxsize=8192)  # noqa: B019 - one lexicon per process, never freed
    def synsets(self, word: str, pos: str) -> tuple[Synset, ...]:
        """The word's meanings in this part of speech, most frequent first."""
        if not self.available:
            return ()
        found: list[Synset] = []
        for _, line in self._entries(word.replace(" ", "_"), pos):
            fields = line.decode("latin-1").split()
            synset_count, pointer_count = int(fields[2]), int(fields[3])
            offsets = fields[6 + pointer_count:6 + pointer_count + synset_count]
            found += [self.synset(pos, int(o)) for o in offsets]
        return tuple(dict.fromkeys(found))

    @lru_cache(maxsize=8192)  # noqa: B019
    def tagged_senses(self, word: str, pos: str) -> int:
        """How many of the word's meanings in this part of speech occur in WordNet's
        sense-tagged texts: its most frequent ones come first, and a meaning nobody used
        there counts 0 (``pirate`` as a verb, ``pillow`` as one)."""
        total = 0
        for _, line in self._entries(word.replace(" ", "_"), pos) if self.available else ():
            fields = line.split()
            total += int(fields[5 + int(fields[3])])
        return total

    @lru_cache(maxsize=32768)  # noqa: B019
    def synset(self, pos: str, offset: int) -> Synset:
        data_pos = "a" if pos == "s" else pos
        text = self._data[data_pos].read_at(offset).decode("latin-1")
        head, _, gloss = text.partition(" | ")
        fields = head.split()
        at = 4 + 2 * int(fields[3], 16)  # the words, each with its lexical id
        written = [w.split("(")[0] for w in fields[4:at:2]]
        words = tuple(w.lower() for w in written)
        acronyms = frozenset(w.lower() for w in written if len(w) > 1 and w.isupper())
        # each pointer: symbol, offset, part of speech, source/target (sliced, not looped)
        ends = fields[at + 1:at + 1 + 4 * int(fields[at])]
        pointers = tuple(zip(ends[0::4], map(int, ends[1::4]), ends[2::4], strict=True))
        return Synset(data_pos, offset, words, pointers, gloss.strip(), acronyms)

    def sense_counts(self, word: str) -> dict[str, int]:
        """How many meanings the word has, per part of speech (none: absent)."""
        counts = {}
        for pos in POS_FILES:
            if n := len(self.synsets(word, pos)):
                counts[pos] = n
        return counts

    def knows(self, word: str) -> bool:
        """Whether the word (in any of its forms) is an English word WordNet lists."""
        return self.available and any(self.base_forms(word, pos) for pos in POS_FILES)


def find_wordnet() -> Path | None:
    """The folder holding WordNet's database files, or None.

    ``KG_WORDNET_DIR``, when set, is the only folder looked at: a wrong one is not
    quietly replaced by another (and ``KG_WORDNET_DIR=/nowhere`` runs without WordNet,
    as a machine without the package does)."""
    configured = os.environ.get("KG_WORDNET_DIR")
    for folder in [configured] if configured else WORDNET_DIRS:
        if (Path(folder) / "index.noun").exists() and (Path(folder) / "data.noun").exists():
            return Path(folder)
    return None


#: What a server without WordNet tells its user (log, ``kg-fuse server status``).
MISSING = ("no WordNet database found: query words the corpus never uses are not read "
           "for their meaning, and the calibrated default is at least "
           f"{tuning.NO_WORDNET_FLOOR.value:.2f} (the safe floor without it). Install "
           "it: sudo apt-get install wordnet-base (other systems: see the README), or "
           "set KG_WORDNET_DIR")


@lru_cache(maxsize=1)
def wordnet() -> WordNet:
    """The process's WordNet (empty, with a warning, when no database is installed)."""
    root = find_wordnet()
    if root is None:
        log.warning("%s", MISSING)
    return WordNet(root)
