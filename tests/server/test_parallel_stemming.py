"""Searches run in parallel threads, and each stems its query's words."""

from __future__ import annotations

import sys
import threading

import snowballstemmer

from kg_fuse.server.search import lexicon


def nouns(count: int) -> list[str]:
    """Real words, most of them never stemmed in this process before."""
    words = [f"{word}{suffix}" for word in ("compress", "archive", "decode", "parse")
             for suffix in ("", "s", "ed", "ing", "er", "ers", "ion", "ions")]
    words += [f"zq{n}ation" for n in range(count)] + [f"yx{n}ingly" for n in range(count)]
    return words


def test_concurrent_searches_stem_their_words_correctly() -> None:
    """The stemmer keeps the word it is working on in itself: searches in parallel must
    not stem through each other (wrong stems, or an IndexError out of the stemmer)."""
    words = nouns(3000)
    reference = snowballstemmer.stemmer("english")
    expected = {word: reference.stemWord(word) for word in words}
    wrong: list[str] = []
    failed: list[BaseException] = []

    def stem_all(part: list[str]) -> None:
        try:
            wrong.extend(word for word in part if lexicon.stem(word) != expected[word])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    threads = [threading.Thread(target=stem_all, args=(words[i::4],)) for i in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as a busy server might
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failed == [] and wrong == []
