"""Mounted: a listing longer than one page of the server's search, through the kernel.

Ontologies, documents, scoped and nested queries, links, the list controls, status and
xattrs are checked without a kernel in ``tests/core/test_core_tree.py``."""

from __future__ import annotations

import os
import tomllib

import pytest

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount


def results(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))


def settings(directory) -> dict:
    return tomllib.loads(open(os.path.join(directory, ".meta", "query.toml")).read())


def test_limit_above_a_page_pages_through(mounted: Mount) -> None:
    query = mounted.path("files@0")
    query.mkdir()
    cut = len(results(query))  # cut where the scores fall, at most comprehensive's 25
    assert 1 <= cut <= 25
    (query / ".meta" / "limit").write_text("250\n")  # every match above 0, up to 250
    assert len(results(query)) == 250
    assert settings(query)["limit"] == 250
    (query / ".meta" / "limit").write_text("default\n")
    assert len(results(query)) == cut


def test_a_nested_query_s_status_names_the_parent_threshold_through_the_kernel(
        mounted: Mount) -> None:
    """End to end (the details are checked in tests/core): an empty nested listing's
    ``.meta/status``, read through the kernel, names the enclosing query's threshold."""
    parent = mounted.path("read data from files")
    parent.mkdir()
    (parent / "compressed archives").mkdir()
    (parent / ".meta" / "threshold").write_text("0.99\n")
    assert results(parent / "compressed archives") == []
    status = dict(line.split(": ", 1) for line in
                  (parent / "compressed archives" / ".meta" / "status").read_text().splitlines())
    assert status["filtered by"].startswith(
        "level 1, the enclosing query 'read data from files' at 0.99 (override)")
