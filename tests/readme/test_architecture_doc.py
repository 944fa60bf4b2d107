"""docs/architecture.md names the code as it is: every module table lists each module of
its folder, and nothing that is gone; every test it cites exists.

A newcomer finds their way by that page, so a module added, moved or removed without it
fails here, naming the folder and what is missing or extra.
"""

from __future__ import annotations

import ast
import builtins
import errno
import os
import re
import select
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"

#: A module table's first line names its folder: "| `kg_fuse/fs/handlers/` | ... |".
_TABLE_HEAD = re.compile(r"^\| `(kg_fuse/[\w/]*)` (?:\(top\) )?\|")
_CODE = re.compile(r"`([^`]+)`")
#: Names the page writes as code that are not kg-fuse's: the kernel's, HTTP's, libraries'.
_NOT_OURS = {"GET", "POST", "PUT", "DELETE", "OPENDIR", "malloc_trim"}
_LIBRARIES = ("httpx.", "pyfuse3.", "trio.")


def _module_tables() -> dict[str, set[str]]:
    """Each table's folder and the names its rows' first cells hold."""
    tables: dict[str, set[str]] = {}
    folder = None
    for line in DOC.read_text().splitlines():
        head = _TABLE_HEAD.match(line)
        if head:
            folder = head.group(1).rstrip("/")
            tables[folder] = set()
        elif folder and line.startswith("|") and not line.startswith("|---"):
            first_cell = line.split("|")[1]
            tables[folder] |= set(_CODE.findall(first_cell))
        elif not line.strip():
            folder = None
    return tables


def _modules_of(folder: Path) -> set[str]:
    """The modules and sub-packages a table of this folder must name."""
    names = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
    names |= {p.name + "/" for p in folder.iterdir()
              if (p / "__init__.py").exists()}
    return names


def test_every_module_table_lists_its_folder_exactly() -> None:
    tables = _module_tables()
    assert len(tables) >= 15, f"the module tables were not found in {DOC}"
    wrong = []
    for folder, named in sorted(tables.items()):
        path = ROOT / folder
        assert path.is_dir(), f"docs/architecture.md has a table for {folder}/, which is gone"
        # a sub-package with a table of its own need not be named in its parent's
        own_tables = {Path(f).name + "/" for f in tables if Path(f).parent == Path(folder)}
        actual = _modules_of(path)
        missing = actual - named - own_tables
        extra = {n for n in named if n.endswith((".py", "/")) and not (path / n).exists()}
        if missing or extra:
            wrong.append(f"{folder}/: not in its table {sorted(missing)}, "
                         f"named but not there {sorted(extra)}")
    assert wrong == []


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def test_every_test_cited_exists() -> None:
    """A cited test is a file, and each name after it (``::name`` or `` `name` ``, up to
    the next file or the end of the cell) a test defined there."""
    text = DOC.read_text()
    cited = 0
    wrong = []
    for line in text.splitlines():
        for cell in line.split("|"):
            current: Path | None = None
            for token in re.findall(r"tests/[\w/]+\.py|\btest_\w+\.py|\btest_\w+", cell):
                if token.endswith(".py"):
                    path = ROOT / token if token.startswith("tests/") else (
                        current.parent / token if current else None)
                    if path is None or not path.exists():
                        wrong.append(f"no file {token}")
                        current = None
                        continue
                    current = path
                    cited += 1
                elif current is not None:
                    cited += 1
                    if token not in _test_names(current):
                        wrong.append(f"no {token} in {current.relative_to(ROOT)}")
    assert cited >= 30, "the tests docs/architecture.md cites were not found"
    assert wrong == []


def _defined_names() -> set[str]:
    """Every module, class, function, and assigned name or attribute of kg_fuse and the
    tests (the doc names test helpers too)."""
    names: set[str] = set()
    for path in [*ROOT.glob("kg_fuse/**/*.py"), *ROOT.glob("tests/**/*.py")]:
        names.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.id if isinstance(node, ast.Name) else node.attr)
    return names


def _ours(token: str) -> bool:
    last = token.rsplit(".", 1)[-1]
    return not (token in _NOT_OURS or token.startswith(_LIBRARIES)
                or any(hasattr(m, last) for m in (builtins, errno, os, select)))


def test_every_name_of_the_code_exists() -> None:
    """A class, function, constant or attribute written as code (`QueryService.results`,
    `recalibrate_if_drifted`, `SERVER_RETRY`) is defined somewhere: a rename that left the
    page behind fails here."""
    defined = _defined_names()
    prose = re.sub(r"^```.*?^```", "", DOC.read_text(), flags=re.S | re.M)
    tokens = {t for line in prose.splitlines() for t in _CODE.findall(line)
              if re.fullmatch(r"[A-Za-z_][\w.]*", t) and not t.endswith((".py", ".md"))
              and ("_" in t or "." in t or not t.islower())}
    assert len(tokens) >= 100, "the names of the code were not found"
    missing = sorted(t for t in tokens if _ours(t) and t.rsplit(".", 1)[-1] not in defined)
    assert missing == []
