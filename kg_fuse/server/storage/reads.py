"""The read side of the store, for the routes: every query the HTTP layer needs.

Catalog listings show published documents only: an ingested document is published once
its concepts are searchable (``content.publish_documents``).

Route modules hold no SQL; they call these functions (blocking: from worker threads) and
turn :class:`NotFound` into a 404. Where evidence comes from (instance -> chunk ->
document -> ontology) is read through the store's ``evidence`` view, the one place that
join is written.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Literal

from kg_fuse.server.corpus import content_hash, copy_id
from kg_fuse.server.storage.store import Store, by_concept, in_batches

ChildKind = Literal["ontology", "document", "concept"]


class NotFound(LookupError):
    """No such ontology, document, concept or source; the message is the 404's detail."""


_SORTS = {"name": "name COLLATE NOCASE, id", "child_count": "child_count DESC, name, id",
          "created": "created_at, name, id"}
_CHILDREN: dict[ChildKind, str] = {
    "ontology": """
        SELECT o.id, o.name, o.created_at, NULL AS content_type, NULL AS filename,
               NULL AS near_duplicates,
               (SELECT COUNT(*) FROM documents d WHERE d.ontology_id = o.id
                AND d.published) AS child_count
        FROM ontologies o""",
    "document": """
        SELECT d.id, d.name, d.created_at, d.content_type, d.filename, d.near_duplicates,
               (SELECT COUNT(DISTINCT e.concept_id) FROM evidence e
                WHERE e.document_id = d.id) AS child_count
        FROM documents d WHERE d.ontology_id = :parent AND d.published""",
    "concept": """
        SELECT k.id, k.label AS name, k.created_at, NULL AS content_type,
               NULL AS filename, NULL AS near_duplicates, 0 AS child_count
        FROM concepts k WHERE k.id IN (SELECT e.concept_id FROM evidence e
                                       WHERE e.document_id = :parent)""",
}


@dataclass
class Page:
    total: int
    rows: list[sqlite3.Row]


def _like(q: str) -> str:
    return "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def resolve_parent(store: Store, parent: str, kind: str | None) -> tuple[str, str]:
    """(kind, id) of a catalog parent; an ontology may be named instead of id'd."""
    if kind is None:
        kind = "document" if parent.startswith("sha256:") else "ontology"
    if kind == "ontology":
        row = store.query_one("SELECT id FROM ontologies WHERE id = ? OR name = ? "
                              "ORDER BY id = ? DESC", (parent, parent, parent))
        if row is None:
            raise NotFound(f"Ontology not found: {parent}")
        return kind, row["id"]
    if store.query_one("SELECT 1 FROM documents WHERE id = ?", (parent,)) is None:
        raise NotFound(f"Document not found: {parent}")
    return kind, parent


def children(store: Store, child_kind: ChildKind, parent_id: str | None, q: str | None,
             sort: str, limit: int, offset: int) -> Page:
    """One page of a catalog parent's children, filtered by name and sorted."""
    params: dict[str, object] = {"parent": parent_id}
    sql = f"SELECT * FROM ({_CHILDREN[child_kind]}) AS x"
    if q:
        sql += " WHERE name LIKE :q ESCAPE '\\'"
        params["q"] = _like(q)
    total = int(store.scalar(f"SELECT COUNT(*) FROM ({sql})", params) or 0)
    rows = store.query(f"{sql} ORDER BY {_SORTS[sort]} LIMIT :limit OFFSET :offset",
                       {**params, "limit": limit, "offset": offset})
    return Page(total, rows)


def near_duplicates(row: sqlite3.Row) -> list[dict]:
    """A document row's near-duplicate sections, as recorded at ingestion."""
    return json.loads(row["near_duplicates"] or "[]")


# -- ontologies ------------------------------------------------------------------------


def ontology(store: Store, name: str) -> sqlite3.Row:
    row = store.query_one("SELECT * FROM ontologies WHERE name = ?", (name,))
    if row is None:
        raise NotFound(f"Ontology '{name}' not found")
    return row


def ontology_statistics(store: Store, ontology_id: str) -> dict[str, int]:
    """Sources, files, concepts, instances and outgoing relationships of an ontology."""
    in_ontology = "SELECT concept_id FROM evidence WHERE ontology_id = :o"
    queries = {
        "source_count": "SELECT COUNT(*) FROM chunks c JOIN documents d "
                        "ON d.id = c.document_id WHERE d.ontology_id = :o",
        "file_count": "SELECT COUNT(*) FROM documents WHERE ontology_id = :o AND published",
        "concept_count": f"SELECT COUNT(DISTINCT concept_id) FROM ({in_ontology})",
        "instance_count": f"SELECT COUNT(*) FROM ({in_ontology})",
        "relationship_count": "SELECT COUNT(*) FROM relationships "
                              f"WHERE from_id IN ({in_ontology})",
    }
    return {key: int(store.scalar(sql, {"o": ontology_id}) or 0)
            for key, sql in queries.items()}


def ontology_files(store: Store, ontology_id: str) -> list[str]:
    return [r["filename"] for r in store.query(
        "SELECT filename FROM documents WHERE ontology_id = ? AND published "
        "ORDER BY filename",
        (ontology_id,))]


def document_in_ontology(store: Store, content: str, ontology: str) -> str | None:
    """The id under which ``ontology`` holds this exact content (None: it does not)."""
    row = store.query_one(
        "SELECT d.id FROM documents d JOIN ontologies o ON o.id = d.ontology_id "
        "WHERE d.id IN (?, ?) AND o.name = ?",
        (content_hash(content), copy_id(content, ontology), ontology))
    return None if row is None else row["id"]


# -- documents and sources -------------------------------------------------------------


def document(store: Store, document_id: str) -> sqlite3.Row:
    row = store.query_one("SELECT * FROM documents WHERE id = ?", (document_id,))
    if row is None:
        raise NotFound(f"Document not found: {document_id}")
    return row


def chunks(store: Store, document_id: str) -> list[dict]:
    """A document's chunks in the contract's chunk shape, in paragraph order."""
    return [dict(r) for r in store.query(
        "SELECT source_id, paragraph, full_text, char_start AS char_offset_start, "
        "char_end AS char_offset_end FROM chunks WHERE document_id = ? ORDER BY paragraph",
        (document_id,))]


def document_concepts(store: Store, document_id: str) -> list[dict]:
    """One row per (concept, source) pair of the document, most instances first."""
    return [dict(r) for r in store.query(
        "SELECT e.concept_id, COALESCE(NULLIF(k.label, ''), e.concept_id) AS name, "
        "e.source_id, COUNT(*) AS instance_count FROM evidence e "
        "JOIN concepts k ON k.id = e.concept_id WHERE e.document_id = ? "
        "GROUP BY e.concept_id, e.source_id "
        "ORDER BY instance_count DESC, name, e.concept_id, e.source_id", (document_id,))]


def source_content_type(store: Store, source_id: str) -> str:
    row = store.query_one("SELECT d.content_type FROM chunks c JOIN documents d "
                          "ON d.id = c.document_id WHERE c.source_id = ?", (source_id,))
    if row is None:
        raise NotFound(f"Source not found: {source_id}")
    return row["content_type"]


# -- concepts --------------------------------------------------------------------------


def concept(store: Store, concept_id: str) -> sqlite3.Row:
    row = store.query_one("SELECT id, label, description, search_terms, signature "
                          "FROM concepts WHERE id = ?", (concept_id,))
    if row is None:
        raise NotFound(f"Concept '{concept_id}' not found")
    return row


def relationships(store: Store, concept_id: str) -> list[sqlite3.Row]:
    return store.query(
        "SELECT r.to_id, c.label, r.rel_type, r.confidence FROM relationships r "
        "JOIN concepts c ON c.id = r.to_id WHERE r.from_id = ? "
        "ORDER BY r.rel_type, r.confidence DESC, c.label", (concept_id,))


def provenance_documents(store: Store, concept_id: str) -> list[dict]:
    """The documents a concept's evidence comes from, with how many of their sources, in
    the contract's provenance shape."""
    return [dict(r) for r in store.query(
        "SELECT document_id, filename, source_type, source_path, "
        "COUNT(DISTINCT source_id) AS source_count FROM evidence WHERE concept_id = ? "
        "GROUP BY document_id ORDER BY filename", (concept_id,))]


def ontologies_of(store: Store, ids: list[str]) -> dict[str, list[str]]:
    """Concept id -> the names of the ontologies its evidence comes from, sorted."""
    return by_concept(in_batches(store, "SELECT DISTINCT concept_id, ontology FROM evidence "
                                 "WHERE concept_id IN ({ids}) ORDER BY ontology", ids),
                      "ontology")


def concept_ids(store: Store) -> set[str]:
    """Every stored concept's id."""
    return {r[0] for r in store.query("SELECT id FROM concepts")}


def concept_labels(store: Store) -> list[tuple[str, str, str]]:
    """(id, label, description) of every concept, in id order."""
    return [(r["id"], r["label"], r["description"] or "") for r in store.query(
        "SELECT id, label, description FROM concepts ORDER BY id")]


def labels(store: Store, ids: list[str]) -> dict[str, str]:
    """Concept id -> label, for those of ``ids`` that exist."""
    marks = ",".join("?" * len(ids))
    return {r["id"]: r["label"] for r in store.query(
        f"SELECT id, label FROM concepts WHERE id IN ({marks})", ids)}


def concept_summaries(store: Store, ids: list[str]) -> dict[str, dict]:
    """Label, description, ontology names and evidence count of each concept."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    out: dict[str, dict] = {
        r["id"]: {"label": r["label"], "description": r["description"] or "",
                  "documents": [], "evidence_count": 0}
        for r in store.query(
            f"SELECT id, label, description FROM concepts WHERE id IN ({marks})", ids)
    }
    for r in store.query(
        f"SELECT concept_id, COUNT(*) AS n FROM instances WHERE concept_id IN ({marks}) "
        "GROUP BY concept_id", ids):
        out[r["concept_id"]]["evidence_count"] = r["n"]
    for cid, names in ontologies_of(store, ids).items():
        out[cid]["documents"] = names
    return out


def instances(store: Store, concept_id: str, limit: int = -1) -> list[dict]:
    """A concept's evidence in the contract's instance shape, oldest first."""
    rows = store.query("SELECT * FROM evidence WHERE concept_id = ? ORDER BY instance_id "
                       "LIMIT ?", (concept_id, limit))
    return [{"quote": r["quote"], "document": r["ontology"], "paragraph": r["paragraph"],
             "source_id": r["source_id"], "full_text": r["full_text"] or "",
             "content_type": r["content_type"], "has_image": False, "image_uri": None,
             "storage_key": None, "filename": r["filename"],
             "source_type": r["source_type"], "source_path": r["source_path"],
             "source_hostname": None} for r in rows]
