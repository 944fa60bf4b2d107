#!/usr/bin/env python3
"""Record what the embedded server answers to a fixed sequence of requests, or compare two
recordings. Prints figures; asserts nothing.

    .venv/bin/python scripts/record_api.py record OUT.json [--store STORE]
    .venv/bin/python scripts/record_api.py compare BEFORE.json AFTER.json

``record`` runs the real app in-process (``httpx.ASGITransport``, as the kernel-free
tests do) over a copy of ``STORE`` (default: the test suite's small built store, made by
``python -m tests.helpers.store``), with the real model, and sends the requests one at a
time, in one order: every query text of every eval set (``kg_fuse/eval/sets``), some with
other limits, offsets, thresholds and ontologies; concept details; ontology, catalog and
document listings; health and the epoch; sign-ins and requests refused (401, 403, 404,
422); the admin's threshold; then changes (a default set, an ontology made and removed,
a document ingested and one deleted) and searches after them. Each answer is kept as its
status and body bytes, with only fields that are times, tokens or random ids masked.

A refactoring that keeps the API's behaviour keeps every body byte-identical: record
before and after over the same store, then ``compare``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

API_URL = "http://kg.record"  # never resolved: the transport is the app itself
SETS = ROOT / "kg_fuse" / "eval" / "sets"
#: Fields whose values differ from run to run: times, tokens and random ids.
MASKED = ("access_token", "created_at", "started_at", "completed_at", "set_at",
          "set_by", "calibrated_at", "ingested_at", "job_id", "existing_job_id",
          "created_by", "client_id")
_MASK = re.compile(r'"(' + "|".join(MASKED) + r')":("(?:[^"\\]|\\.)*"|-?[0-9.eE+-]+|null)')
#: Every k-th query text is also searched with these variations.
VARIATIONS: tuple[dict[str, Any], ...] = (
    {"limit": 3}, {"limit": 25, "offset": 2}, {"min_similarity": 0.0, "limit": 50},
    {"min_similarity": 0.35}, {"min_similarity": 0.9}, {"offset": 10},
    {"include_evidence": True, "limit": 5},
)
VARY_EVERY = 7


def mask(body: str) -> str:
    return _MASK.sub(lambda m: f'"{m.group(1)}":"<masked>"', body)


def query_texts() -> list[str]:
    """Every query text of the shipped eval sets, in file order, each once."""
    texts: list[str] = []
    for path in sorted(SETS.glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        texts += [q["text"].strip() for q in raw.get("query", [])]
        texts += [str(q) for q in raw.get("queries", []) + raw.get("gibberish", [])]
    return list(dict.fromkeys(t for t in texts if t.strip()))


class Recorder:
    """Sends requests one at a time and keeps each answer."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.records: list[dict[str, Any]] = []
        self.headers: dict[str, dict[str, str]] = {}
        #: values made afresh by each run (secrets, ids) -> what the recording shows
        self.fresh: dict[str, str] = {}

    def learn(self, value: str, name: str) -> None:
        """``value`` (made afresh by this run) is shown as ``name``, from the last answer on."""
        self.fresh[value] = name
        self.records[-1]["body"] = self.shown(self.records[-1]["body"])

    def shown(self, text: str) -> str:
        for value, name in self.fresh.items():
            text = text.replace(value, name)
        return text

    async def send(self, method: str, path: str, who: str | None = "user",
                   **kwargs: Any) -> Any:
        headers = dict(self.headers.get(who or "", {}))
        headers.update(kwargs.pop("headers", {}))
        response = await self.http.request(method, path, headers=headers, **kwargs)
        request = {k: v for k, v in kwargs.items() if k in ("json", "params", "data")}
        self.records.append({"method": method, "path": self.shown(path), "who": who,
                             "request": json.loads(self.shown(json.dumps(request))),
                             "status": response.status_code,
                             "body": self.shown(mask(response.text))})
        try:
            return response.json()
        except ValueError:
            return None

    async def sign_in(self, who: str, credentials: dict[str, str]) -> None:
        self.fresh[credentials["client_id"]] = f"<{who} id>"
        self.fresh[credentials["client_secret"]] = f"<{who} secret>"
        answer = await self.send("POST", "/auth/oauth/token", who=None, data={
            "grant_type": "client_credentials", **credentials})
        self.headers[who] = {"Authorization": f"Bearer {answer['access_token']}"}


async def _searches(rec: Recorder, texts: list[str], ontologies: list[str]) -> set[str]:
    """Every text searched with the defaults; every k-th with variations too."""
    seen: set[str] = set()
    for i, text in enumerate(texts):
        answer = await rec.send("POST", "/query/search", json={"query": text})
        seen |= {r["concept_id"] for r in (answer or {}).get("results", [])}
        if i % VARY_EVERY == 0:
            for variation in VARIATIONS:
                await rec.send("POST", "/query/search", json={"query": text, **variation})
            if ontologies:
                await rec.send("POST", "/query/search", json={
                    "query": text, "ontology": ontologies[i % len(ontologies)],
                    "min_similarity": 0.1})
    return seen


async def _refusals(rec: Recorder, credentials: dict[str, dict[str, str]]) -> None:
    """Requests the contract refuses: each status and detail."""
    user = credentials["user"]
    await rec.send("POST", "/auth/oauth/token", who=None, data={
        "grant_type": "client_credentials", "client_id": user["client_id"],
        "client_secret": "wrong"})
    await rec.send("POST", "/auth/oauth/token", who=None, data={
        "grant_type": "client_credentials", "client_id": "nobody", "client_secret": "x"})
    await rec.send("POST", "/auth/oauth/token", who=None, data={"grant_type": "password",
                                                                  **user})
    await rec.send("POST", "/auth/oauth/token", who=None, data={"client_id": "x"})
    await rec.send("POST", "/auth/oauth/token", who=None, json={"grant_type": "x"})
    await rec.send("POST", "/query/search", who=None, json={"query": "gzip"})
    await rec.send("POST", "/query/search", who=None, json={"query": "gzip"},
                   headers={"Authorization": "Basic abc"})
    await rec.send("POST", "/query/search", who=None, json={"query": "gzip"},
                   headers={"Authorization": "Bearer not-a-token"})
    await rec.send("POST", "/query/search", who=None, content=b"{not json",
                   headers={"Content-Type": "application/json"})
    for body in ({"query": ""}, {"query": "gzip", "limit": 0},
                 {"query": "gzip", "limit": 101}, {"query": "gzip", "min_similarity": 1.5},
                 {"query": "gzip", "offset": -1}, {"query": "x" * 3000}, {"limit": 3}):
        await rec.send("POST", "/query/search", json=body)
    await rec.send("GET", "/admin/config/search-threshold")
    await rec.send("PUT", "/admin/config/search-threshold", json={"threshold": 0.5})
    await rec.send("GET", "/query/concept/no-such-concept")
    await rec.send("GET", "/ontology/no-such-ontology")
    await rec.send("GET", "/documents/no-such-document/content")
    await rec.send("GET", "/documents/no-such-document/concepts")
    await rec.send("GET", "/jobs/no-such-job")
    await rec.send("GET", "/sources/no-such-source/image")
    await rec.send("GET", "/catalog/children", params={"parent": "no-such-parent"})
    await rec.send("GET", "/catalog/children", params={"limit": 0})
    await rec.send("PUT", "/admin/config/search-threshold", who="admin",
                   json={"threshold": 2})
    await rec.send("POST", "/ingest/image", files={"file": ("a.txt", b"x" * 200)},
                   data={"ontology": "images"})
    await rec.send("POST", "/ingest/image", files={"file": ("a.png", b"x" * 200)},
                   data={"ontology": "images"})


async def _browse(rec: Recorder) -> tuple[list[str], list[str]]:
    """Catalog, ontology and document listings; returns the ontologies and documents."""
    await rec.send("GET", "/health", who=None)
    await rec.send("GET", "/database/epoch")
    top = await rec.send("GET", "/catalog/children")
    ontologies = sorted(n["name"] for n in top["nodes"])
    for sort in ("name", "child_count", "created"):
        await rec.send("GET", "/catalog/children", params={"sort": sort, "limit": 3,
                                                           "offset": 1})
    await rec.send("GET", "/catalog/children", params={"q": "json"})
    documents: list[str] = []
    for name in ontologies:
        await rec.send("GET", f"/ontology/{name}")
        listing = await rec.send("GET", "/catalog/children", params={
            "parent": name, "parent_kind": "ontology", "limit": 1000})
        documents += [n["id"] for n in listing["nodes"]]
    for doc in documents:
        await rec.send("GET", f"/documents/{doc}/content")
        concepts = await rec.send("GET", f"/documents/{doc}/concepts")
        await rec.send("GET", "/catalog/children", params={
            "parent": doc, "parent_kind": "document", "limit": 20, "sort": "child_count"})
        for chunk in (concepts or {}).get("concepts", [])[:1]:
            await rec.send("GET", f"/sources/{chunk['source_id']}/image")
    return ontologies, documents


async def _changes(rec: Recorder, documents: list[str], ontologies: list[str]) -> None:
    """An ontology made and removed, a document ingested and one deleted, an ontology
    deleted (a change large enough to recalibrate the default), the default set by the
    administrator; each followed by what a client then reads."""
    import trio

    probes = ("compress a file", "parse json text", "blah blah blah", "temporary folder")

    async def read_back(*extra: str) -> None:
        for text in (*probes, *extra):
            await rec.send("POST", "/query/search", json={"query": text})
        await rec.send("GET", "/database/epoch")
        await rec.send("GET", "/admin/config/search-threshold", who="admin")

    made = await rec.send("POST", "/ontology/", json={"name": "recorded",
                                                      "description": "made"})
    rec.learn(made["node"]["ontology_id"], "<ontology id>")
    await rec.send("POST", "/ontology/", json={"name": "recorded"})
    await rec.send("GET", "/ontology/recorded")
    await rec.send("GET", "/catalog/children")
    text = ("# Brewing tea\n\nWarm the pot, add the leaves and pour water just off the "
            "boil.\n\n# Storing tea\n\nKeep the leaves in a dark, airtight tin.\n")
    upload = {"files": {"file": ("tea.md", text.encode())}, "data": {"ontology": "recorded"}}
    job = await rec.send("POST", "/ingest", **upload)
    rec.learn(job["job_id"], "<job id>")
    for _ in range(600):
        state = await rec.http.get(f"/jobs/{job['job_id']}", headers=rec.headers["user"])
        if state.json()["status"] in ("completed", "failed"):
            break
        await trio.sleep(0.1)
    await rec.send("GET", f"/jobs/{job['job_id']}")
    await rec.send("POST", "/ingest", **upload)
    await rec.send("GET", "/catalog/children", params={"parent": "recorded",
                                                       "parent_kind": "ontology"})
    await read_back("brew a pot of tea", "airtight tin")
    await rec.send("DELETE", "/ontology/recorded")
    await rec.send("DELETE", "/ontology/recorded")
    if documents:
        await rec.send("DELETE", f"/documents/{documents[0]}")
        await rec.send("DELETE", f"/documents/{documents[0]}")
    await read_back("brew a pot of tea")
    if "File Formats" in ontologies:  # a fifth of the concepts: the default recalibrates
        await rec.send("DELETE", "/ontology/File Formats")
        await read_back("read a csv file", "parse a plist")
    await rec.send("PUT", "/admin/config/search-threshold", who="admin",
                   json={"threshold": 0.41})
    await read_back()
    await rec.send("GET", "/health", who=None)


async def record(store_path: Path) -> list[dict[str, Any]]:
    import httpx

    from kg_fuse.server.api.app import create_app
    from kg_fuse.server.api.auth import ensure_credentials, token_ttl
    from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES
    from kg_fuse.server.embedding.embedder import Embedder
    from kg_fuse.server.knowledge.graph import KnowledgeGraph
    from kg_fuse.server.startup.prepare import prepare
    from kg_fuse.server.storage.store import Store
    from tests.helpers.store import copy_store

    with tempfile.TemporaryDirectory(prefix="kg-record-") as work:
        store = Store(copy_store(store_path, Path(work) / "kg.sqlite3"))
        embedder = Embedder()
        embedder.load()
        graph = KnowledgeGraph(store, embedder)
        try:
            prepare(graph, corpus="stdlib", modules=list(SMALL_TEST_MODULES),
                            progress=False)
            credentials = ensure_credentials(store, Path(work) / "credentials.json", API_URL)
            app = create_app(graph, token_ttl(None))
            async with app.router.lifespan_context(app), httpx.AsyncClient(
                    transport=httpx.ASGITransport(app=app), base_url=API_URL,
                    timeout=600) as http:
                rec = Recorder(http)
                await rec.sign_in("user", credentials["user"])
                await rec.sign_in("admin", credentials["admin"])
                ontologies, documents = await _browse(rec)
                await _refusals(rec, credentials)
                seen = await _searches(rec, query_texts(), ontologies)
                for cid in sorted(seen):
                    await rec.send("GET", f"/query/concept/{cid}")
                await _changes(rec, documents, ontologies)
                return rec.records
        finally:
            store.close()


def digest(record_: dict[str, Any]) -> str:
    return hashlib.sha256(f"{record_['status']} {record_['body']}".encode()).hexdigest()


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> int:
    differ = []
    for i, (a, b) in enumerate(zip(before, after, strict=False)):
        same_request = (a["method"], a["path"], a["request"]) == (
            b["method"], b["path"], b["request"])
        if not same_request or digest(a) != digest(b):
            differ.append(i)
    searches = sum(1 for r in before if r["path"] == "/query/search")
    print(f"requests: {len(before)} before, {len(after)} after ({searches} searches)")
    print(f"identical: {len(before) - len(differ) if len(before) == len(after) else '-'}"
          f", differing: {len(differ)}")
    for i in differ[:10]:
        a, b = before[i], after[i]
        print(f"#{i} {a['method']} {a['path']} {json.dumps(a['request'])[:120]}")
        print(f"  before {a['status']}: {a['body'][:300]}")
        print(f"  after  {b['status']}: {b['body'][:300]}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="record the answers into OUT (JSON)")
    rec.add_argument("out", type=Path)
    rec.add_argument("--store", type=Path, default=None,
                     help="a built store (kg.sqlite3), copied, never written "
                          "(default: the test suite's small store)")
    cmp = sub.add_parser("compare", help="compare two recordings")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.command == "compare":
        return compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    import trio

    if args.store is None:
        from tests.helpers.store import STORE_CACHE, built_store

        args.store = built_store(STORE_CACHE)
    started = time.monotonic()
    records = trio.run(record, args.store)
    args.out.write_text(json.dumps(records, indent=0))
    statuses: dict[int, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    print(f"recorded {len(records)} requests in {time.monotonic() - started:.0f} s "
          f"into {args.out}; statuses: "
          + ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
