"""The rows the search reads: each concept's view vectors and ontologies (for the index),
and the FTS5 keyword index's terms and matches. How they are scored is the search's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from kg_fuse.server.storage.store import Store, in_batches


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


# -- the keyword index (on a connection held with Store.locked) ------------------------


def index_terms(conn: sqlite3.Connection) -> list[str]:
    """Every term of the keyword index."""
    return [r[0] for r in conn.execute("SELECT term FROM concept_terms")]


def name_terms(conn: sqlite3.Connection) -> frozenset[str]:
    """The terms of the index's name column (a per-connection vocabulary table)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.concept_name_terms USING "
                 "fts5vocab(main, concept_text, 'col')")
    return frozenset(r[0] for r in conn.execute(
        "SELECT DISTINCT term FROM temp.concept_name_terms WHERE col = 'name'"))


def term_documents(conn: sqlite3.Connection, term: str) -> int:
    """How many concepts hold ``term`` (0: none)."""
    row = conn.execute("SELECT doc FROM concept_terms WHERE term = ?", (term,)).fetchone()
    return int(row[0]) if row is not None else 0


def term_matches(conn: sqlite3.Connection, match: str, limit: int, bm25_weights: str,
                 ) -> list[tuple[str, float]]:
    """The ``limit`` best concepts for an FTS5 ``match``, with their bm25 score (column
    weights ``bm25_weights``), higher is better."""
    return [(r[0], r[1]) for r in conn.execute(
        f"SELECT concept_id, -bm25(concept_text, {bm25_weights}) AS s FROM concept_text "
        "WHERE concept_text MATCH ? ORDER BY s DESC LIMIT ?", (match, limit))]
