"""The rows of ingest jobs: recorded pending, updated at each stage, read by their id.
Running them is :mod:`kg_fuse.server.knowledge.jobs`'s."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from kg_fuse.server.corpus import content_hash
from kg_fuse.server.storage.store import Store

#: Written as JSON, read back as what was written.
JSON_FIELDS = ("progress", "result")


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def unfinished(store: Store) -> list[dict]:
    """Jobs not yet completed, failed or cancelled (a previous process left them)."""
    return [dict(r) for r in store.query(
        "SELECT id, ontology, content_hash, started_at FROM jobs "
        "WHERE status NOT IN ('completed', 'failed', 'cancelled')")]


def listed_document(store: Store, ontology: str, digest: str, since: float) -> str | None:
    """The listed document of this content in this ontology stored since ``since``."""
    for row in store.query(
            "SELECT d.id, d.content FROM documents d JOIN ontologies o "
            "ON o.id = d.ontology_id WHERE o.name = ? AND d.published = 1 "
            "AND d.created_at >= ?", (ontology, int(since))):
        if content_hash(row["content"]) == digest:
            return str(row["id"])
    return None


def newest(store: Store, digest: str, ontology: str) -> dict | None:
    """The id and status of the newest job for this content into this ontology."""
    row = store.query_one(
        "SELECT id, status FROM jobs WHERE content_hash = ? AND ontology = ? "
        "ORDER BY created_at DESC", (digest, ontology))
    return None if row is None else dict(row)


def insert(store: Store, job_id: str, digest: str, filename: str, ontology: str,
           client_id: str) -> None:
    """Record a pending ingestion job."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO jobs(id, job_type, status, created_at, ontology, filename, "
            "content_hash, client_id) VALUES (?, 'ingestion', 'pending', ?, ?, ?, ?, ?)",
            (job_id, time.time(), ontology, filename, digest, client_id))


def update(store: Store, job_id: str, **fields: object) -> None:
    """Set these columns of the job's row."""
    for key in JSON_FIELDS:
        if key in fields and fields[key] is not None:
            fields[key] = json.dumps(fields[key])
    assignments = ", ".join(f"{k} = ?" for k in fields)
    with store.transaction() as conn:
        conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*fields.values(), job_id))


def get(store: Store, job_id: str) -> dict | None:
    """The job in the contract's shape, or None when unknown."""
    row = store.query_one("SELECT * FROM jobs WHERE id = ?", (job_id,))
    if row is None:
        return None
    return {
        "job_id": row["id"], "job_type": row["job_type"], "status": row["status"],
        "progress": json.loads(row["progress"]) if row["progress"] else None,
        "result": json.loads(row["result"]) if row["result"] else None,
        "error": row["error"], "created_at": iso(row["created_at"]),
        "started_at": iso(row["started_at"]), "completed_at": iso(row["completed_at"]),
        "ontology": row["ontology"], "filename": row["filename"],
        "content_hash": row["content_hash"],
    }
