"""Every SQL statement of kg-fuse is written in the server's storage folder: the rest of
the code asks storage for rows by name, so the schema can change in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import kg_fuse

PACKAGE = Path(kg_fuse.__file__).parent
STORAGE = PACKAGE / "server" / "storage"

#: A statement's opening words, as SQL is written here (upper-case keywords).
STATEMENT = re.compile(
    r"\b(SELECT\s.*\bFROM\b|INSERT\s+(OR\s+\w+\s+)?INTO\b|UPDATE\s+\w+\s+SET\b|"
    r"DELETE\s+FROM\b|(CREATE|DROP|ALTER)\s+(VIRTUAL\s+)?(TABLE|INDEX|VIEW)\b|PRAGMA\s+\w+)",
    re.DOTALL)
#: Calls that run SQL or open a database.
RUNS_SQL = {"execute", "executemany", "executescript", "connect"}


def sql_outside_storage(package: Path) -> list[str]:
    """``path:line`` of every SQL statement or sqlite call outside storage."""
    storage = package / "server" / "storage"
    out = []
    for path in sorted(package.rglob("*.py")):
        if storage in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(package.parent)
        skipped = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                        ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        skipped |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)
                       for v in n.values}  # an f-string's parts: read as one below
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and id(node) not in skipped
                    and isinstance(node.value, str) and STATEMENT.search(node.value)):
                out.append(f"{rel}:{node.lineno}: {node.value[:60]!r}")
            elif isinstance(node, ast.JoinedStr):
                text = " ".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if STATEMENT.search(text):
                    out.append(f"{rel}:{node.lineno}: {text[:60]!r}")
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in RUNS_SQL
                  and isinstance(node.func.value, ast.Name)
                  and node.func.value.id in {"conn", "sqlite3", "cursor", "db"}):
                out.append(f"{rel}:{node.lineno}: {node.func.value.id}.{node.func.attr}()")
    return sorted(out)


def test_the_scan_finds_sql_outside_storage_and_skips_storage(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "server" / "storage").mkdir(parents=True)
    (package / "server" / "storage" / "rows.py").write_text(
        'def rows(conn):\n    return conn.execute("SELECT id FROM concepts")\n')
    (package / "search.py").write_text(
        'def ids(store, table):\n    """SELECT nothing FROM a docstring."""\n'
        '    return store.query(f"SELECT id FROM {table} "\n'
        '                       "WHERE id = ?")\n'
        'def put(conn):\n    conn.executemany("INSERT OR REPLACE INTO t VALUES (?)", [])\n')
    assert [hit.split(": ")[0] for hit in sql_outside_storage(package)] == [
        "pkg/search.py:3", "pkg/search.py:6", "pkg/search.py:6"]


def test_sql_is_written_only_in_server_storage() -> None:
    assert STORAGE.is_dir()
    assert sql_outside_storage(PACKAGE) == []


def _outside_storage(package: Path) -> list[tuple[Path, ast.AST]]:
    storage = package / "server" / "storage"
    return [(path, ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(package.rglob("*.py")) if storage not in path.parents]


def sqlite_outside_storage(package: Path) -> list[str]:
    """``path:line`` of every import of sqlite3, and every use of the store's lock
    (``locked()``, ``transaction()``), outside storage: storage takes its own lock."""
    out = []
    for path, tree in _outside_storage(package):
        rel = path.relative_to(package.parent)
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[0] == "sqlite3" for name in names):
                out.append(f"{rel}:{node.lineno}: import sqlite3")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"locked", "transaction"}
                    and "store" in ast.unparse(node.func.value)):
                out.append(f"{rel}:{node.lineno}: {ast.unparse(node.func)}()")
    return sorted(out)


def test_the_scan_finds_sqlite_and_the_store_s_lock_outside_storage(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "server" / "storage").mkdir(parents=True)
    (package / "server" / "storage" / "rows.py").write_text("import sqlite3\n")
    (package / "search.py").write_text(
        "import sqlite3\nfrom sqlite3 import Row\n"
        "def f(store):\n    with store.locked() as conn:\n        return conn\n")
    assert [hit.split(": ")[0] for hit in sqlite_outside_storage(package)] == [
        "pkg/search.py:1", "pkg/search.py:2", "pkg/search.py:4"]


def test_only_storage_imports_sqlite3_and_takes_the_store_s_lock() -> None:
    """(``lint-imports`` checks the imports too: contract ``sqlite-in-storage``.)"""
    assert sqlite_outside_storage(PACKAGE) == []
