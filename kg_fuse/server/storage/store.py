"""The embedded server's SQLite store: one file, WAL mode, one locked connection.

One connection shared by the event loop's worker threads keeps SQLite's locking simple;
every public method takes the lock, so callers never hold a cursor across threads.
A store from before per-view vectors keeps its single vectors as the ``description``
view (the same text, see :mod:`kg_fuse.server.search.views`); only the other views are
embedded, once, at its next start.
Content changes go through :meth:`Store.transaction`, which bumps the epoch counter in
the same transaction so the epoch strictly increases whenever visible content changes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kg_fuse import owner_only, paths

log = logging.getLogger(__name__)

EPOCH_KEY = "epoch"
SERVER_ID_KEY = "server_id"
SERVER_ID_HOME_KEY = "server_id_home"  # where the store was when its id was made

Params = tuple | list | dict
#: What reading a store's file raises when it is no store (not SQLite, unreadable): the
#: one name for SQLite's errors outside storage.
StoreError = sqlite3.Error
#: Ids bound to one statement at most: SQLite's limit on variables is 999 in old builds.
BATCH = 500

SCHEMA = """
CREATE TABLE IF NOT EXISTS ontologies (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    creation_epoch INTEGER NOT NULL,
    created_by TEXT
);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    ontology_id TEXT NOT NULL REFERENCES ontologies(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    filename TEXT NOT NULL,
    content TEXT NOT NULL,
    content_type TEXT NOT NULL DEFAULT 'document',
    source_type TEXT,
    source_path TEXT,
    created_at REAL NOT NULL,
    near_duplicates TEXT NOT NULL DEFAULT '[]',
    published INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS documents_ontology ON documents(ontology_id);
CREATE TABLE IF NOT EXISTS chunks (
    source_id TEXT PRIMARY KEY,
    document_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    paragraph INTEGER NOT NULL,
    full_text TEXT NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id);
CREATE TABLE IF NOT EXISTS concepts (
    id TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    search_terms TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL,
    signature TEXT NOT NULL DEFAULT '',
    examples TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS instances (
    id INTEGER PRIMARY KEY,
    concept_id TEXT NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    source_id TEXT NOT NULL REFERENCES chunks(source_id) ON DELETE CASCADE,
    quote TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS instances_concept ON instances(concept_id);
CREATE INDEX IF NOT EXISTS instances_source ON instances(source_id);
CREATE TABLE IF NOT EXISTS relationships (
    from_id TEXT NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    to_id TEXT NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    rel_type TEXT NOT NULL,
    confidence REAL,
    PRIMARY KEY (from_id, to_id, rel_type)
);
CREATE INDEX IF NOT EXISTS relationships_to ON relationships(to_id);
CREATE TABLE IF NOT EXISTS concept_views (
    concept_id TEXT NOT NULL REFERENCES concepts(id) ON DELETE CASCADE,
    view TEXT NOT NULL,
    model TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (concept_id, view)
);
CREATE VIRTUAL TABLE IF NOT EXISTS concept_text USING fts5(
    concept_id UNINDEXED, name, signature, description, examples,
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS concept_terms USING fts5vocab(concept_text, 'row');
CREATE TRIGGER IF NOT EXISTS concept_text_delete AFTER DELETE ON concepts BEGIN
    DELETE FROM concept_text WHERE rowid = old.rowid;
END;
CREATE TABLE IF NOT EXISTS settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    salt TEXT NOT NULL,
    role TEXT NOT NULL,
    is_admin INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    job_type TEXT NOT NULL,
    status TEXT NOT NULL,
    progress TEXT,
    error TEXT,
    result TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    completed_at REAL,
    ontology TEXT NOT NULL,
    filename TEXT,
    content_hash TEXT NOT NULL,
    client_id TEXT
);
CREATE INDEX IF NOT EXISTS jobs_hash ON jobs(content_hash);
"""

#: The instances -> chunks -> documents -> ontologies join, written once: one row per
#: piece of evidence, with where it comes from. SQLite flattens the view into the query
#: that reads it, so filtering it costs what the join would. Recreated at every open, so
#: a new definition replaces an older store's.
EVIDENCE_VIEW = """
DROP VIEW IF EXISTS evidence;
CREATE VIEW evidence AS
SELECT i.id AS instance_id, i.concept_id, i.quote, c.source_id, c.paragraph, c.full_text,
       d.id AS document_id, d.filename, d.content_type, d.source_type, d.source_path,
       d.ontology_id, o.name AS ontology
FROM instances i
JOIN chunks c ON c.source_id = i.source_id
JOIN documents d ON d.id = c.document_id
JOIN ontologies o ON o.id = d.ontology_id;
"""

#: Columns added after the first release: (name, declaration) per table, applied with
#: ALTER TABLE when an existing store lacks them.
ADDED_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "concepts": (("signature", "TEXT NOT NULL DEFAULT ''"),
                 ("examples", "TEXT NOT NULL DEFAULT ''")),
    "documents": (("near_duplicates", "TEXT NOT NULL DEFAULT '[]'"),
                  ("published", "INTEGER NOT NULL DEFAULT 1")),
}


class Store:
    """All persistent state of the embedded server, behind one lock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        owner_only.log_fixed(owner_only.private_files(paths.sqlite_files(path)))
        owner_only.create_file(path)  # the full text of every document: owner only
        self.path = path
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(SCHEMA)
        self._add_missing_columns()
        self._conn.executescript(EVIDENCE_VIEW)
        self._migrate_single_vectors()
        log.info("store opened at %s", path)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def copy_to(self, target: Path) -> None:
        """A consistent copy of the whole store at ``target`` (SQLite's online backup:
        readers and a running server go on meanwhile)."""
        with self._lock, contextlib.closing(sqlite3.connect(str(target))) as copy:
            self._conn.backup(copy)

    def seal(self) -> None:
        """Close the store as one self-contained file (no write-ahead log beside it),
        ready to be renamed into place."""
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=DELETE")
            self._conn.close()

    def _add_missing_columns(self) -> None:
        """Bring a store written by an older version up to the current schema."""
        for table, columns in ADDED_COLUMNS.items():
            present = {r["name"] for r in self._conn.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in present:
                    log.info("store migration: adding %s.%s", table, name)
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")

    def _migrate_single_vectors(self) -> None:
        """Move a pre-views store's ``embeddings`` rows into ``concept_views``."""
        if self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                              "name = 'embeddings'").fetchone() is None:
            return
        with self.transaction() as conn:
            moved = conn.execute(
                "INSERT OR IGNORE INTO concept_views(concept_id, view, model, vector) "
                "SELECT concept_id, 'description', model, vector FROM embeddings").rowcount
            conn.execute("DROP TABLE embeddings")
        log.info("store migration: kept %d concept vectors as their description view",
                 moved)

    # -- low level ---------------------------------------------------------------------

    def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        with self._lock:
            return self._conn.execute(sql, params).fetchone()

    def scalar(self, sql: str, params: Params = ()) -> object:
        row = self.query_one(sql, params)
        return None if row is None else row[0]

    @contextmanager
    def locked(self) -> Iterator[sqlite3.Connection]:
        """The connection, for several reads in a row (keyword search)."""
        with self._lock:
            yield self._conn

    @contextmanager
    def transaction(self, content_change: bool = False) -> Iterator[sqlite3.Connection]:
        """A write transaction; ``content_change`` bumps the epoch inside it."""
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                yield self._conn
                if content_change:
                    self._conn.execute(
                        "INSERT INTO settings(key, value) VALUES (?, '1') ON CONFLICT(key) "
                        "DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                        (EPOCH_KEY,),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                # a Ctrl-C can land once COMMIT is done (or before BEGIN took effect):
                # there is nothing to roll back then, and the interrupt must surface as
                # itself, not as SQLite's "cannot rollback - no transaction is active"
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    # -- settings ----------------------------------------------------------------------

    def get_setting(self, key: str) -> str | None:
        value = self.scalar("SELECT value FROM settings WHERE key = ?", (key,))
        return None if value is None else str(value)

    def set_setting(self, key: str, value: str) -> None:
        self.set_settings({key: value})

    def set_settings(self, values: dict[str, str]) -> None:
        """Several settings in one transaction: readers see all of them or none."""
        with self.transaction() as conn:
            for key, value in values.items():
                write_setting(conn, key, value)

    def delete_settings(self, keys: Iterable[str]) -> None:
        with self.transaction() as conn:
            conn.executemany("DELETE FROM settings WHERE key = ?", [(k,) for k in keys])

    def get_json_setting(self, key: str) -> object:
        raw = self.get_setting(key)
        return None if raw is None else json.loads(raw)

    def epoch(self) -> int:
        raw = self.get_setting(EPOCH_KEY)
        return int(raw) if raw is not None else 0

    def server_id(self) -> str:
        """This server's identity, which mounts keep their saved queries under: made the
        first time it is asked for, and made anew when the store answers from another
        place (a copied data directory is another server, with its own queries)."""
        home = os.path.realpath(self.path)
        with self.locked() as conn:  # every poll asks: a read, no write lock
            current = read_setting(conn, SERVER_ID_KEY)
            if current is not None and read_setting(conn, SERVER_ID_HOME_KEY) == home:
                return current
        with self.transaction() as conn:  # two first asks at once agree on one id
            current = read_setting(conn, SERVER_ID_KEY)
            if current is not None and read_setting(conn, SERVER_ID_HOME_KEY) == home:
                return current
            made = uuid.uuid4().hex
            write_setting(conn, SERVER_ID_KEY, made)
            write_setting(conn, SERVER_ID_HOME_KEY, home)
        log.info("server identity %s (store at %s%s)", made, home,
                 "" if current is None else f"; it was {current} elsewhere")
        return made

    # -- counts ------------------------------------------------------------------------

    def concept_count(self) -> int:
        return int(self.scalar("SELECT COUNT(*) FROM concepts") or 0)


def read_setting(conn: sqlite3.Connection, key: str) -> str | None:
    """A setting read on a connection already held (see :meth:`Store.locked`)."""
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def write_setting(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Insert or replace one setting on a connection already held."""
    conn.execute("INSERT INTO settings(key, value) VALUES (?, ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))


def read_setting_at(db: Path, key: str) -> str | None:
    """A setting read from the file alone, read-only: no schema, no migration, no lock
    (a running server may hold the store)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return read_setting(conn, key)


def by_concept(rows: Iterable[sqlite3.Row], column: str) -> dict[str, list]:
    """``concept_id`` -> the rows' ``column`` values, in the rows' order."""
    out: dict[str, list] = defaultdict(list)
    for r in rows:
        out[r["concept_id"]].append(r[column])
    return out


def in_batches(store: Store, sql: str, ids: list[str]) -> Iterator[sqlite3.Row]:
    """The rows of ``sql`` for ``ids``, :data:`BATCH` ids at a time; ``{ids}`` in ``sql``
    stands for their placeholders."""
    for start in range(0, len(ids), BATCH):
        part = ids[start:start + BATCH]
        yield from store.query(sql.format(ids=",".join("?" * len(part))), part)
