"""A model's grade outside any store, for ``kg-fuse model add`` and ``model list``: the
pairs' measurement (:mod:`kg_fuse.server.store_model.pairs`), read for its grade
(:mod:`kg_fuse.server.store_model.grade`), kept by model name, weights digest and recipe
in the cache directory beside the graphs, so each model is measured once. A store
records its own measurement (:class:`~kg_fuse.server.store_model.owner.StoreModel`),
and hands its grade on here (:func:`remember`), so a model a store was built with shows
its grade in ``model list`` without being measured again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import asdict

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.models import ModelSpec, graphs_dir
from kg_fuse.server.store_model.grade import Grade
from kg_fuse.server.store_model.pairs import RECIPE, measure

log = logging.getLogger(__name__)

_FILE = "grades.json"


def _key(spec: ModelSpec) -> str:
    return f"{spec.name}@{spec.digest}:{RECIPE}"


def _table() -> dict[str, dict]:
    try:
        table = json.loads((graphs_dir() / _FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return table if isinstance(table, dict) else {}


def known(spec: ModelSpec) -> Grade | None:
    """The model's grade if it was measured (by ``model add``, ``model list --grade``,
    or a store built with it)."""
    held = _table().get(_key(spec))
    try:
        return Grade(**held) if isinstance(held, dict) else None
    except TypeError:
        return None


def remember(spec: ModelSpec, grade: Grade) -> None:
    """Keep ``grade`` as the model's (a read-only cache only costs measuring again)."""
    table = _table()
    if table.get(_key(spec)) == asdict(grade):
        return
    table[_key(spec)] = asdict(grade)
    with contextlib.suppress(OSError):
        graphs_dir().mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=graphs_dir(), prefix=".grades.")
        with os.fdopen(fd, "w") as out:
            json.dump(table, out)
        os.replace(partial, graphs_dir() / _FILE)


def grade(spec: ModelSpec) -> Grade:
    """The model's grade: known, or measured now (loading the model) and kept."""
    held = known(spec)
    if held is not None:
        return held
    embedder = Embedder(spec)
    measured = measure(embedder.encode_queries, embedder.encode, spec.name).grade
    log.info("grade of %s: %s", spec.name, measured.summary())
    remember(spec, measured)
    return measured
