"""Content's rows: writing corpus specs, concept texts and vectors, similarity links,
deletions.

Every function here that changes what a client can see bumps the epoch in the same
transaction. Embedding happens elsewhere, outside the store lock, so a slow batch never
stalls readers (:mod:`kg_fuse.server.knowledge.indexing`); callers run these functions in
worker threads.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kg_fuse.server.corpus import DocumentSpec, concept_id, copy_id
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)


def _ontology_id(conn: sqlite3.Connection, name: str, description: str = "",
                 created_by: str | None = None) -> str:
    row = conn.execute("SELECT id FROM ontologies WHERE name = ?", (name,)).fetchone()
    if row is not None:
        return str(row[0])
    ont_id = f"ont_{uuid.uuid4()}"
    epoch_row = conn.execute("SELECT value FROM settings WHERE key = 'epoch'").fetchone()
    conn.execute(
        "INSERT INTO ontologies(id, name, description, created_at, creation_epoch, created_by)"
        " VALUES (?, ?, ?, strftime('%s','now'), ?, ?)",
        (ont_id, name, description, int(epoch_row[0]) if epoch_row else 0, created_by),
    )
    return ont_id


def create_ontology(store: Store, name: str, description: str = "",
                    created_by: str | None = None) -> None:
    """Create an empty ontology; FileExistsError when that name is taken."""
    with store.transaction(content_change=True) as conn:
        if conn.execute("SELECT 1 FROM ontologies WHERE name = ?", (name,)).fetchone():
            raise FileExistsError(name)
        _ontology_id(conn, name, description, created_by)


# Concepts left without evidence once documents went (their instances cascade).
DELETE_ORPHANS = ("DELETE FROM concepts WHERE id NOT IN "
                  "(SELECT DISTINCT concept_id FROM instances)")


def delete_ontology(store: Store, name: str) -> dict[str, int] | None:
    """Delete an ontology, its documents and the concepts left without evidence."""
    with store.transaction(content_change=True) as conn:
        row = conn.execute("SELECT id FROM ontologies WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        ont_id = row[0]
        sources = conn.execute(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.ontology_id = ?", (ont_id,)).fetchone()[0]
        documents = conn.execute("DELETE FROM documents WHERE ontology_id = ?",
                                 (ont_id,)).rowcount
        orphans = conn.execute(DELETE_ORPHANS).rowcount
        conn.execute("DELETE FROM ontologies WHERE id = ?", (ont_id,))
    log.info("deleted ontology %r: %d documents, %d sources, %d orphaned concepts",
             name, documents, sources, orphans)
    return {"sources_deleted": int(sources), "documents_deleted": int(documents),
            "orphaned_concepts_deleted": int(orphans)}


def delete_document(store: Store, document_id: str) -> dict[str, int] | None:
    """Remove one document and the concepts only it supported; None when unknown."""
    with store.transaction(content_change=True) as conn:
        sources = conn.execute("SELECT COUNT(*) FROM chunks WHERE document_id = ?",
                               (document_id,)).fetchone()[0]
        if not conn.execute("DELETE FROM documents WHERE id = ?", (document_id,)).rowcount:
            return None
        orphans = conn.execute(DELETE_ORPHANS).rowcount
    return {"sources_deleted": int(sources), "orphaned_concepts_deleted": int(orphans)}


def delete_unpublished(store: Store) -> int:
    """Take out the documents an ingest stored but never listed (the server was killed
    in its middle) and the concepts only they had; returns how many. Their jobs are
    reported failed, to be uploaded again: publishing them would make that untrue, and
    the upload a duplicate."""
    if store.query_one("SELECT 1 FROM documents WHERE published = 0") is None:
        return 0  # the usual start: the epoch stays
    with store.transaction(content_change=True) as conn:
        dropped = conn.execute("DELETE FROM documents WHERE published = 0").rowcount
        conn.execute(DELETE_ORPHANS)
    return int(dropped)


def write_documents(store: Store, docs: Iterable[DocumentSpec],
                    created_by: str | None = None, published: bool = True,
                    ) -> dict[str, DocumentSpec]:
    """Insert the documents their ontologies do not hold yet; returns them by the id
    each was stored under. A concept another document already has gains evidence.

    An ingested document is stored unpublished: the catalog lists it only once its
    concepts are embedded and searchable (:func:`publish_documents`), so nobody who sees
    the document searches for its concepts in vain.
    """
    held = {r["id"]: r["name"] for r in store.query(
        "SELECT d.id, o.name FROM documents d JOIN ontologies o ON o.id = d.ontology_id")}
    fresh: list[tuple[str, DocumentSpec]] = []
    for doc in docs:  # the same content twice in one batch is stored once
        doc_id = _new_document_id(doc, held)
        if doc_id is not None:
            held[doc_id] = doc.ontology
            fresh.append((doc_id, doc))
    if not fresh:
        return {}
    created: list[str] = []
    with store.transaction(content_change=True) as conn:
        ontology_ids: dict[str, str] = {}
        for doc_id, doc in fresh:
            if doc.ontology not in ontology_ids:
                ontology_ids[doc.ontology] = _ontology_id(conn, doc.ontology,
                                                          created_by=created_by)
            _insert_document(conn, doc, doc_id, ontology_ids[doc.ontology], created,
                             published)
        for _, doc in fresh:
            for concept in doc.concepts:
                for rel_type, target_seed in concept.relations:
                    target = concept_id(target_seed)
                    conn.execute(
                        "INSERT OR IGNORE INTO relationships(from_id, to_id, rel_type, "
                        "confidence) SELECT ?, id, ?, 1.0 FROM concepts WHERE id = ?",
                        (concept.id, rel_type, target),
                    )
    log.info("stored %d documents with %d new concepts", len(fresh), len(created))
    return dict(fresh)


def _new_document_id(doc: DocumentSpec, held: dict[str, str]) -> str | None:
    """The content hash, or the copy's own id when another ontology holds that content;
    None when the document's ontology already holds it."""
    copy = copy_id(doc.content, doc.ontology)
    if held.get(doc.id) == doc.ontology or copy in held:
        return None
    return copy if doc.id in held else doc.id


def _insert_document(conn: sqlite3.Connection, doc: DocumentSpec, doc_id: str,
                     ontology_id: str, created: list[str], published: bool) -> None:
    conn.execute(
        "INSERT INTO documents(id, ontology_id, name, filename, content, content_type, "
        "source_type, source_path, created_at, published) "
        "VALUES (?, ?, ?, ?, ?, 'document', ?, ?, strftime('%s','now'), ?)",
        (doc_id, ontology_id, doc.name, doc.filename, doc.content, doc.source_type,
         doc.source_path, int(published)),
    )
    prefix = doc_id.split(":", 1)[1][:16]
    source_ids = {}
    for chunk in doc.chunks:
        source_id = f"{prefix}_chunk{chunk.paragraph}"
        source_ids[chunk.paragraph] = source_id
        conn.execute(
            "INSERT INTO chunks(source_id, document_id, paragraph, full_text, char_start, "
            "char_end) VALUES (?, ?, ?, ?, ?, ?)",
            (source_id, doc_id, chunk.paragraph, chunk.text, chunk.start, chunk.end),
        )
    for concept in doc.concepts:
        cur = conn.execute(
            "INSERT OR IGNORE INTO concepts(id, label, description, search_terms, created_at,"
            " signature, examples) VALUES (?, ?, ?, ?, strftime('%s','now'), ?, ?)",
            (concept.id, concept.label, concept.description, json.dumps([concept.label]),
             concept.signature, concept.examples),
        )
        if cur.rowcount:
            created.append(concept.id)
        conn.executemany(
            "INSERT INTO instances(concept_id, source_id, quote) VALUES (?, ?, ?)",
            [(concept.id, source_ids[para], quote) for para, quote in concept.evidence],
        )


@dataclass
class ConceptText:
    """A concept's view texts (embedded) and keyword fields (FTS5)."""

    id: str
    views: dict[str, str]
    name: str
    signature: str
    description: str
    examples: str












def save_views(store: Store, model: str, vectors: list[tuple[str, str, bytes]],
               texts: list[ConceptText]) -> None:
    """Store (concept id, view, float32 bytes) vectors and the concepts' keyword text,
    in one transaction."""
    with store.transaction(content_change=True) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO concept_views(concept_id, view, model, vector) "
            "VALUES (?, ?, ?, ?)", [(cid, view, model, blob) for cid, view, blob in vectors])
        _index_text(conn, texts)


def forget_vectors(store: Store) -> None:
    """Drop every stored vector and the SIMILAR_TO links made from them: the store is
    to be embedded again by another model (the epoch moves: every score changes)."""
    with store.transaction(content_change=True) as conn:
        conn.execute("DELETE FROM concept_views")
        conn.execute("DELETE FROM relationships WHERE rel_type = 'SIMILAR_TO'")




def save_text(store: Store, texts: list[ConceptText]) -> None:
    """(Re)write the keyword-search rows of these concepts."""
    with store.transaction() as conn:
        _index_text(conn, texts)


def publish_documents(store: Store, near_duplicates: dict[str, list[dict]] | None = None,
                      ) -> int:
    """List every unpublished document in the catalog, with its near-duplicate status.

    Called once the index holds their concepts; the epoch moves in the same transaction,
    so a client that sees the new epoch sees the documents and can find their concepts.
    """
    if not near_duplicates and store.query_one(
            "SELECT 1 FROM documents WHERE published = 0") is None:
        return 0  # nothing to show: the epoch stays
    with store.transaction(content_change=True) as conn:
        for document_id, found in (near_duplicates or {}).items():
            conn.execute("UPDATE documents SET near_duplicates = ? WHERE id = ?",
                         (json.dumps(found), document_id))
        return conn.execute("UPDATE documents SET published = 1 WHERE published = 0").rowcount


def _index_text(conn: sqlite3.Connection, concepts: list[ConceptText]) -> None:
    """(Re)write the keyword-search rows of these concepts (rowid = the concept's)."""
    for c in concepts:
        rowid = conn.execute("SELECT rowid FROM concepts WHERE id = ?", (c.id,)).fetchone()
        if rowid is None:
            continue
        conn.execute("DELETE FROM concept_text WHERE rowid = ?", (rowid[0],))
        conn.execute(
            "INSERT INTO concept_text(rowid, concept_id, name, signature, description, "
            "examples) VALUES (?, ?, ?, ?, ?, ?)",
            (rowid[0], c.id, c.name, c.signature, c.description, c.examples))




def add_similar(store: Store, edges: list[tuple[str, str, float]]) -> None:
    """SIMILAR_TO edges (from, to, cosine as confidence)."""
    with store.transaction(content_change=True) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO relationships(from_id, to_id, rel_type, confidence) "
            "VALUES (?, ?, 'SIMILAR_TO', ?)", edges)
