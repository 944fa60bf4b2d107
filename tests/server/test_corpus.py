"""The corpus builders' views (signature, description, examples) and their storage."""

from __future__ import annotations

import json
import logging
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from kg_fuse.server.corpus import live
from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.corpus.stdlib import build_stdlib_corpus
from kg_fuse.server.storage import writes
from kg_fuse.server.storage.store import Store
from tests.helpers.server import KGServer


def _concepts(modules: list[str]) -> dict:
    return {c.label: c for d in build_stdlib_corpus(modules) for c in d.concepts}


def test_source_modules_give_signatures_and_examples() -> None:
    concepts = _concepts(["textwrap", "fnmatch"])
    dedent = concepts["textwrap.dedent"]
    assert dedent.signature == "dedent(text)"
    assert dedent.description.startswith("Remove any common leading whitespace")
    assert dedent.examples and dedent.description not in dedent.examples
    wrapper = concepts["textwrap.TextWrapper"]
    assert wrapper.signature.startswith("TextWrapper(width=70")  # no ``self``
    assert concepts["fnmatch.filter"].signature == "filter(names, pat)"


def test_markdown_sections_split_into_description_and_examples() -> None:
    text = ("# Bread\n\nBake bread at home.\n\nKnead for ten minutes.\n\nProve twice.\n\n"
            "## Rye\n\nOnly one paragraph.\n")
    doc = parse_text_document(text, "bread.md", "kitchen")
    bread, rye = doc.concepts
    assert (bread.label, bread.description) == ("Bread", "Bake bread at home.")
    assert bread.examples == "Knead for ten minutes.\n\nProve twice."
    assert (rye.signature, rye.examples) == ("", "")


def test_old_store_gains_the_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "kg.sqlite3"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE concepts (id TEXT PRIMARY KEY, label TEXT NOT NULL, "
                "description TEXT NOT NULL DEFAULT '', search_terms TEXT NOT NULL "
                "DEFAULT '[]', created_at REAL NOT NULL)")
    old.execute("INSERT INTO concepts VALUES ('c_old', 'old', 'kept', '[]', 0)")
    old.commit()
    old.close()
    store = Store(path)
    try:
        row = store.query_one("SELECT label, description, signature, examples "
                              "FROM concepts WHERE id = 'c_old'")
        assert tuple(row) == ("old", "kept", "", "")
        writes.write_documents(store, build_stdlib_corpus(["fnmatch"]))
        stored = store.query_one("SELECT signature FROM concepts WHERE label = ?",
                                 ("fnmatch.fnmatch",))
        assert stored["signature"] == "fnmatch(name, pat)"
    finally:
        store.close()
    Store(path).close()  # reopening a migrated store is a no-op


@pytest.fixture(scope="module")
def http(kg_server: KGServer) -> httpx.Client:
    return kg_server.client("user")


def test_concept_details_carry_the_signature(http: httpx.Client) -> None:
    hits = http.post("/query/search", json={"query": "filter names matching a shell pattern",
                                            "min_similarity": 0.0, "limit": 20}).json()
    by_label = {r["label"]: r["concept_id"] for r in hits["results"]}
    assert "fnmatch.filter" in by_label
    body = http.get(f"/query/concept/{by_label['fnmatch.filter']}").json()
    assert body["signature"] == "filter(names, pat)"


# -- the compiled half: built-ins and C modules, read in a child process ------------------


@pytest.fixture(scope="module")
def compiled() -> dict:
    modules = ["builtins", "math", "zlib", "os", "posix", "posixpath", "itertools", "csv"]
    return _concepts(modules)


def test_c_implemented_apis_are_concepts_with_signatures(compiled: dict) -> None:
    expected = {
        "sorted": "sorted(iterable, /, *, key=None, reverse=False)",
        "len": "len(obj, /)",
        "list.sort": "sort(self, /, *, key=None, reverse=False)",
        "dict.get": "get(self, key, default=None, /)",
        "math.sqrt": "sqrt(x, /)",
        "zlib.compress": "compress(data, /, level=-1, wbits=15)",
        "os.listdir": "listdir(path=None)",
    }
    for label, signature in expected.items():
        assert compiled[label].signature == signature, label
    assert compiled["str.split"].description.startswith("Return a list of the substrings")
    assert compiled["itertools.chain"].description
    # Documented in the doc's first line when inspect cannot say: still a signature.
    assert compiled["max"].signature.startswith("max(iterable")
    assert not compiled["max"].description.startswith("max(")
    assert compiled["csv.reader"].description  # _csv.reader, labelled where users import it


def test_reexports_become_one_concept(compiled: dict) -> None:
    assert "os.listdir" in compiled and "posix.listdir" not in compiled
    assert "posixpath.join" in compiled and "os.path.join" not in compiled
    assert not any(label.startswith(("builtins.", "_")) for label in compiled)
    # Undocumented and private members stay out.
    assert not any(label.rsplit(".", 1)[-1].startswith("_") for label in compiled)


def test_corpus_building_imports_nothing_in_the_calling_process() -> None:
    code = (
        "import sys\n"
        "from kg_fuse.server.corpus.stdlib import build_stdlib_corpus\n"
        "before = set(sys.modules)\n"
        "docs = build_stdlib_corpus()\n"
        "labels = {c.label for d in docs for c in d.concepts}\n"
        "assert {'sorted', 'str.split', 'math.sqrt', 'zlib.compress'} <= labels\n"
        "new = sorted(set(sys.modules) - before)\n"
        "watched = ['tkinter', 'turtle', 'antigravity', 'this', 'idlelib', 'curses',\n"
        "           'readline', 'sqlite3', 'zlib', 'webbrowser', 'ssl', 'pty', 'mailbox']\n"
        "print([m for m in watched if m in new])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_denied_modules_are_never_handed_to_the_worker(monkeypatch) -> None:
    spawned: list[list[str]] = []
    real_spawn = live._spawn
    monkeypatch.setattr(live, "_spawn", lambda mods: spawned.append(mods) or real_spawn(mods))
    found = live.read_modules(["tkinter", "antigravity", "this", "_thread", "colorsys"])
    assert spawned == [["colorsys"]] and set(found) == {"colorsys"}
    assert "tkinter" not in live.public_modules(["tkinter.ttk", "json"])


def test_a_hanging_import_is_skipped_after_its_deadline(monkeypatch, caplog) -> None:
    """Fault injection: a worker that announces a module and never finishes it."""
    hang = ("import json, sys, time\n"
            "print(json.dumps({'begin': 'slowmod'}), flush=True)\n"
            "time.sleep(60)\n")

    def spawn(modules: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", hang], stdout=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)

    monkeypatch.setattr(live, "_spawn", spawn)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert live.read_modules(["slowmod"], module_deadline=1.0) == {}
    assert time.monotonic() - started < 30
    assert "importing slowmod took over 1 s" in caplog.text


def test_docstrings_that_say_nothing_are_not_concepts() -> None:
    concepts = _concepts(["ast", "csv", "signal"])
    assert "ast.Eq" not in concepts  # docstring "Eq"
    assert "ast.BinOp" not in concepts  # docstring is only its grammar line
    assert "signal.Signals" not in concepts  # "An enumeration."
    assert "ast.parse" in concepts and "signal.signal" in concepts
    writer = concepts["csv.writer"]
    assert writer.description.startswith('The "fileobj" argument')  # past "[or]"


def test_a_store_of_an_older_corpus_gains_the_compiled_half(kg_server: KGServer,
                                                            tmp_path: Path) -> None:
    clone = kg_server.clone(tmp_path / "older")
    db = sqlite3.connect(clone.db_path)
    try:
        with db:
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("DELETE FROM documents WHERE filename LIKE '%.pydoc'")
            db.execute("DELETE FROM concepts WHERE id NOT IN "
                       "(SELECT concept_id FROM instances)")
            raw = db.execute("SELECT value FROM settings WHERE key = 'stdlib_corpus'")
            marker = json.loads(raw.fetchone()[0])
            del marker["version"]  # as version 1 wrote it
            db.execute("UPDATE settings SET value = ? WHERE key = 'stdlib_corpus'",
                       (json.dumps(marker),))
        gone = db.execute("SELECT COUNT(*) FROM concepts WHERE label = "
                          "'lzma.LZMACompressor'").fetchone()[0]
    finally:
        db.close()
    assert gone == 0
    clone.start()
    try:
        with clone.client("user") as http:
            body = http.post("/query/search", json={
                "query": "compress data incrementally with LZMA", "min_similarity": 0.0,
                "limit": 30}).json()
        assert "lzma.LZMACompressor" in {r["label"] for r in body["results"]}
        assert "upgrading the stdlib corpus from version 1" in clone.log_text()
    finally:
        clone.stop()


# -- text no upload can make slow --------------------------------------------------------

HEALTH_WITHIN = 1.0  # seconds, during any ingest
#: Lines that made the heading and running-head patterns take quadratic time, holding
#: the GIL: a 30 KB upload left /health unanswered for seconds.
SLOW_LINES = {
    "a heading of spaces": "# Spaces" + " " * 30_000 + "end",
    "a running head of spaces": "TAR(1)" + " " * 30_000 + "x",
}


def _slowest_health_while(server: KGServer, job_done: Callable[[], bool]) -> float:
    """The longest /health answer, polled from another thread until ``job_done``."""
    slowest = [0.0]
    stop = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=server.api_url, timeout=60) as client:
            while not stop.is_set():
                started = time.monotonic()
                assert client.get("/health").status_code == 200
                slowest[0] = max(slowest[0], time.monotonic() - started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        deadline = time.monotonic() + 120
        while not job_done():
            assert time.monotonic() < deadline, "the ingest job did not finish"
            time.sleep(0.05)
    finally:
        stop.set()
        poller.join()
    return slowest[0]


@pytest.mark.parametrize("name", list(SLOW_LINES))
def test_health_answers_while_a_long_line_is_ingested(kg_scratch_server: KGServer,
                                                       name: str) -> None:
    document = f"{SLOW_LINES[name]}\n\nOne paragraph about long lines of {name}.\n"
    ontology = f"long lines {len(name)}"
    with kg_scratch_server.client("user") as http:
        queued = http.post("/ingest", data={"ontology": ontology},
                           files={"file": ("spaces.md", document.encode(), "text/markdown")})
        assert queued.status_code == 200, queued.text
        job_id = queued.json()["job_id"]

        def job_done() -> bool:
            return http.get(f"/jobs/{job_id}").json()["status"] in ("completed", "failed")

        try:
            slowest = _slowest_health_while(kg_scratch_server, job_done)
            assert http.get(f"/jobs/{job_id}").json()["status"] == "completed"
        finally:
            http.delete(f"/ontology/{ontology}")
    assert slowest < HEALTH_WITHIN, slowest
