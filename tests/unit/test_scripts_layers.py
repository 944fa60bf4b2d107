"""The scripts measure the product as a user or a client meets it: through the command
line, the client, the listing and the server, never through the filesystem's own modules
(import-linter's contracts cover the package; the scripts are not in it, so this does)."""

from __future__ import annotations

import ast
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _fs_imports(source: str) -> list[str]:
    """The imports of ``kg_fuse.fs`` (or of ``fs`` from ``kg_fuse``) in a module's text."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[:2] == ["kg_fuse", "fs"]]
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["kg_fuse", "fs"]:
                found.append(node.module)
            elif parts == ["kg_fuse"]:
                found += [f"kg_fuse.{a.name}" for a in node.names if a.name == "fs"]
    return found


def test_the_scan_finds_each_way_of_importing_the_filesystem() -> None:
    source = ("import kg_fuse.fs.mount\nfrom kg_fuse.fs.queries import saved\n"
              "from kg_fuse import fs\nfrom kg_fuse.listing import plan\nimport kg_fuse.client\n")
    assert _fs_imports(source) == ["kg_fuse.fs.mount", "kg_fuse.fs.queries", "kg_fuse.fs"]


def test_no_script_imports_the_filesystem() -> None:
    scripts = sorted(SCRIPTS.glob("*.py"))
    assert len(scripts) > 10
    importing = {p.name: found for p in scripts if (found := _fs_imports(p.read_text()))}
    assert importing == {}
