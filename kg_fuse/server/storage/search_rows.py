"""The rows the search index is made of: each concept's view vectors and ontologies (the
index loads them), what indexing reads to make concepts searchable (concepts lacking a
vector or keyword text, their evidence, the corpus's text, the models that embedded
them), and the FTS5 keyword index's terms and matches (:class:`KeywordIndex`, under the
store's lock). How they are scored is the search's."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kg_fuse.server.storage.store import (
    Store,
    by_concept,
    in_batches,
    read_setting,
    write_setting,
)


def _rows(store: Store, sql: str, ids: list[str] | None) -> Iterator[sqlite3.Row]:
    """All rows of ``sql``, or those of ``ids``."""
    if ids is None:
        yield from store.query(sql)
    else:
        yield from in_batches(store, f"{sql} WHERE concept_id IN ({{ids}})", ids)


def evidence_ontologies(store: Store, ids: list[str] | None = None,
                        ) -> Iterator[sqlite3.Row]:
    """(``concept_id``, ``name``): the ontologies each concept's evidence comes from."""
    return _rows(store, "SELECT DISTINCT concept_id, ontology AS name FROM evidence", ids)


def view_vectors(store: Store, ids: list[str] | None = None) -> Iterator[sqlite3.Row]:
    """(``concept_id``, ``view``, ``vector``): every stored view vector (float32 bytes)."""
    return _rows(store, "SELECT concept_id, view, vector FROM concept_views", ids)


# -- what indexing reads to make concepts searchable ---------------------------------


def chunk_texts(store: Store) -> list[str]:
    """Every chunk's full text (the corpus's own words, for its acronyms)."""
    return [r[0] for r in store.query("SELECT full_text FROM chunks")]


@dataclass(frozen=True)
class StoredConcept:
    """A concept as stored: what its views and keyword text are made from."""

    id: str
    label: str
    description: str
    signature: str
    examples: str


def _concepts(rows: Iterable[sqlite3.Row]) -> list[StoredConcept]:
    return [StoredConcept(r["id"], r["label"], r["description"] or "", r["signature"] or "",
                          r["examples"] or "") for r in rows]


def concepts_lacking_views(store: Store, views: Iterable[str]) -> list[StoredConcept]:
    """The concepts lacking a stored vector for one of ``views``, in id order."""
    lacking = " OR ".join(
        f"id NOT IN (SELECT concept_id FROM concept_views WHERE view = '{v}')" for v in views)
    return _concepts(store.query(f"SELECT * FROM concepts WHERE {lacking} ORDER BY id"))


def concepts_lacking_text(store: Store) -> list[StoredConcept]:
    """The concepts with no keyword-index row, in id order."""
    return _concepts(store.query("SELECT * FROM concepts WHERE rowid NOT IN "
                                 "(SELECT rowid FROM concept_text) ORDER BY id"))


def evidence_quotes(store: Store, concept_ids: list[str]) -> dict[str, list[str]]:
    """Concept id -> its evidence quotes, in the order they were stored."""
    return by_concept(in_batches(store, "SELECT concept_id, quote FROM instances WHERE "
                                 "concept_id IN ({ids}) ORDER BY id", concept_ids), "quote")


def stored_views(store: Store) -> dict[str, set[str]]:
    """Concept id -> the views it has a stored vector of."""
    have: dict[str, set[str]] = defaultdict(set)
    for r in store.query("SELECT concept_id, view FROM concept_views"):
        have[r["concept_id"]].add(r["view"])
    return have


def embedded_models(store: Store) -> list[str]:
    """The models the stored vectors were made by (one, in a store never mixed)."""
    return [r[0] for r in store.query("SELECT DISTINCT model FROM concept_views")]


def texts_of(store: Store, concept_ids: list[str]) -> list[str]:
    """The keyword-indexed text of these concepts."""
    out: list[str] = []
    for r in in_batches(store, "SELECT t.name, t.signature, t.description, t.examples "
                        "FROM concepts c JOIN concept_text t ON t.rowid = c.rowid "
                        "WHERE c.id IN ({ids})", concept_ids):
        out.extend(v for v in r if v)
    return out


# -- the keyword index ------------------------------------------------------------------


class KeywordIndex:
    """The FTS5 keyword index, read on the store's connection while its lock is held
    (:func:`keyword_index`): one query's term lookups, or the vocabulary and its stems,
    see one state of the index."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def terms(self) -> list[str]:
        """Every term of the keyword index."""
        return [r[0] for r in self._conn.execute("SELECT term FROM concept_terms")]

    def name_terms(self) -> frozenset[str]:
        """The terms of the index's name column (a per-connection vocabulary table)."""
        self._conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.concept_name_terms "
                           "USING fts5vocab(main, concept_text, 'col')")
        return frozenset(r[0] for r in self._conn.execute(
            "SELECT DISTINCT term FROM temp.concept_name_terms WHERE col = 'name'"))

    def documents(self, term: str) -> int:
        """How many concepts hold ``term`` (0: none)."""
        row = self._conn.execute("SELECT doc FROM concept_terms WHERE term = ?",
                                 (term,)).fetchone()
        return int(row[0]) if row is not None else 0

    def matches(self, match: str, limit: int, bm25_weights: str) -> list[tuple[str, float]]:
        """The ``limit`` best concepts for an FTS5 ``match``, with their bm25 score
        (column weights ``bm25_weights``), higher is better."""
        return [(r[0], r[1]) for r in self._conn.execute(
            f"SELECT concept_id, -bm25(concept_text, {bm25_weights}) AS s FROM concept_text "
            "WHERE concept_text MATCH ? ORDER BY s DESC LIMIT ?", (match, limit))]

    def setting(self, key: str) -> str | None:
        return read_setting(self._conn, key)

    def keep_setting(self, key: str, value: str) -> str | None:
        """Write a setting; None once written, else why it was not (a read-only store)."""
        try:
            write_setting(self._conn, key, value)
        except sqlite3.Error as exc:
            return str(exc)
        return None


@contextmanager
def keyword_index(store: Store) -> Iterator[KeywordIndex]:
    """The keyword index, under the store's lock until the block ends."""
    with store.locked() as conn:
        yield KeywordIndex(conn)
