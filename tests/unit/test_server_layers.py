"""The routes only translate HTTP to the server's parts and back: each part a route works
with is its own dependency (deps.py), no route reaches through the knowledge graph for
another part, and no route calls another route."""

from __future__ import annotations

import ast
from pathlib import Path

import kg_fuse.server

SERVER = Path(kg_fuse.server.__file__).parent
ROUTES = sorted((SERVER / "api").glob("routes_*.py"))
#: The graph's parts: a route gets each from its own dependency, never through the graph.
PARTS = {"store", "embedder", "searcher", "threshold", "changes", "search", "index"}


def _reaches_through_the_graph(tree: ast.AST) -> list[int]:
    """Lines of ``graph.<part>`` or ``<...>.graph.<part>``, and of any ``.graph``."""
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute)
                   and (node.attr == "graph"
                        or node.attr in PARTS
                        and (isinstance(node.value, ast.Name) and node.value.id == "graph"
                             or isinstance(node.value, ast.Attribute)
                             and node.value.attr == "graph"))})


def _imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {f"{node.module}.{a.name}" for a in node.names} | {node.module or ""}
    return names


def test_routes_reach_no_part_through_the_graph() -> None:
    assert len(ROUTES) >= 7
    found = {p.name: lines for p in ROUTES
             if (lines := _reaches_through_the_graph(ast.parse(p.read_text())))}
    assert found == {}


def test_routes_know_neither_the_graph_nor_the_context() -> None:
    found = {p.name: sorted(hits) for p in ROUTES if (hits := {
        name for name in _imports(ast.parse(p.read_text()))
        if name.startswith("kg_fuse.server.knowledge.graph")
        or name.endswith((".AppContext", ".KnowledgeGraph"))})}
    assert found == {}


def test_no_route_calls_another_route() -> None:
    """(``lint-imports`` checks it too: the routes are independent in ``server-api``.)"""
    found = {p.name: sorted(hits) for p in ROUTES if (hits := {
        name for name in _imports(ast.parse(p.read_text()))
        if ".routes_" in name or name.rsplit(".", 1)[-1].startswith("routes_")})}
    assert found == {}


def test_the_scan_finds_a_route_reaching_through_the_graph() -> None:
    tree = ast.parse("def f(ctx):\n    ctx.graph.store.epoch()\n    graph.searcher.read()\n"
                     "    x = graph.default_threshold()\n")
    assert _reaches_through_the_graph(tree) == [2, 3]
