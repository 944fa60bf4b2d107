"""Starting on a built store: nothing corpus-sized is redone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge import indexing
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.search import keywords, lexicon
from kg_fuse.server.startup.prepare import prepare
from kg_fuse.server.storage.store import Store
from tests.helpers.store import copy_store


@pytest.fixture
def store(small_store: Path, tmp_path: Path) -> Iterator[Store]:
    opened = Store(copy_store(small_store, tmp_path / "kg.sqlite3"))
    yield opened
    opened.close()


def stemmed_during(action) -> list[str]:  # type: ignore[no-untyped-def]
    """The words the stemmer itself was asked for while ``action`` ran (cache emptied)."""
    asked: list[str] = []
    real = lexicon._stemmer

    class Counting:
        def stemWord(self, word: str) -> str:  # noqa: N802 - snowballstemmer's name
            asked.append(word)
            return real.stemWord(word)

    lexicon._stems.clear()
    lexicon._stemmer = Counting()
    try:
        action()
    finally:
        lexicon._stemmer = real
    return asked


def test_a_restart_does_not_stem_the_corpus_again(store: Store) -> None:
    """The corpus's stems are kept in the store: a second start stems nothing, and the
    vocabulary it gets is the one stemming gives."""
    with store.transaction() as conn:  # as a store written before stems were kept
        conn.execute("DELETE FROM settings WHERE key = ?", (keywords.STEMS_KEY,))
    first = stemmed_during(lambda: keywords.load_vocabulary(store))
    vocabulary = keywords.load_vocabulary(store)
    again = stemmed_during(lambda: keywords.load_vocabulary(store))
    restarted = keywords.load_vocabulary(store)
    assert len(first) > 500
    assert again == []
    assert restarted == vocabulary
    assert restarted.forms("compressing") == vocabulary.forms("compressing") != ()


@pytest.mark.parametrize("kept", ['{"stemmer": "another-stemmer-1.0", "stems": '
                                  '{"compress": "x"}}', "not json", "[1, 2]"])
def test_stems_from_another_stemmer_or_unreadable_are_not_used(store: Store,
                                                                kept: str) -> None:
    store.set_setting(keywords.STEMS_KEY, kept)
    asked = stemmed_during(lambda: keywords.load_vocabulary(store))
    vocabulary = keywords.load_vocabulary(store)
    assert "compress" in asked
    assert vocabulary.forms("compress") == vocabulary.forms("compressed") != ()
    rewritten = json.loads(store.get_setting(keywords.STEMS_KEY) or "{}")
    assert rewritten["stemmer"] == lexicon.STEMMER
    assert rewritten["stems"]["compress"] == "compress"


def test_starting_on_a_built_store_reads_no_corpus_text(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to embed or index: the corpus's text (its acronyms) is not read at all."""
    read: list[str] = []
    real = indexing.corpus_acronyms
    monkeypatch.setattr(indexing, "corpus_acronyms",
                        lambda s: read.append("acronyms") or real(s))
    graph = KnowledgeGraph(store, Embedder())
    prepare(graph, corpus="none", progress=False)
    assert len(graph.index) > 100
    assert read == []
