"""The routes reach search and storage through the knowledge graph's methods or through
the dependencies declared in deps.py, never by reaching into the graph for its store."""

from __future__ import annotations

import ast
from pathlib import Path

import kg_fuse.server

SERVER = Path(kg_fuse.server.__file__).parent
#: Still reaching in, on purpose until their branches land (then drop them from here).
NOT_YET: set[str] = set()


def _reaches_for_the_store(path: Path) -> list[int]:
    """Lines of ``<...>.graph.store`` or ``graph.store``."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr == "store"
            and (isinstance(node.value, ast.Name) and node.value.id == "graph"
                 or isinstance(node.value, ast.Attribute) and node.value.attr == "graph")]


def test_routes_read_the_store_through_the_storage_dependency() -> None:
    routes = sorted((SERVER / "api").glob("routes_*.py"))
    assert len(routes) >= 5
    found = {p.name: lines for p in routes if p.name not in NOT_YET
             and (lines := _reaches_for_the_store(p))}
    assert found == {}

