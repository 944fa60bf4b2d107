"""Which model a store's vectors were made by, so that two models' vectors never mix.

A store records its model once it holds vectors: name, dimensions, the digest of its
weights, pooling, normalisation and prompts. A server or an index run given another
model refuses the store, naming the command that re-embeds it
(:mod:`kg_fuse.server.startup.reembed`); given no model, it takes the store's own. A store
from before the record names its model in every vector row (``concept_views.model``),
and the record is written from that at its next start. (The model's score scale is
measured once per store and model too: :mod:`kg_fuse.server.threshold.score_scale`.)
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from kg_fuse.exits import CommandError
from kg_fuse.server.embedding.models import ModelSpec
from kg_fuse.server.storage import search_rows
from kg_fuse.server.storage.store import Store, read_setting_at

log = logging.getLogger(__name__)

MODEL_KEY = "embedding_model"


class ModelMismatch(CommandError):
    """The store was embedded by another model than the one asked for."""


def describe(spec: ModelSpec) -> dict[str, Any]:
    """What a store records of its model."""
    return {"name": spec.name, "dimensions": spec.dimensions, "digest": spec.digest,
            "pooling": spec.pooling, "normalize": spec.normalize,
            "prompts": {"query": spec.prompts.query, "document": spec.prompts.document}}


def stored(store: Store) -> dict[str, Any] | None:
    """The store's model record; for a store from before the record, the model its
    vectors name (``legacy``); None for a store with no vectors."""
    record = store.get_json_setting(MODEL_KEY)
    if isinstance(record, dict) and record.get("name"):
        return record
    models = search_rows.embedded_models(store)
    if not models:
        return None
    return {"name": models[0], "legacy": True, "mixed": models[1:]}


def name_at(db: Path) -> str | None:
    """The name the record of the store file at ``db`` gives, read without opening the
    store (a running server may hold it); None with no record, or one that is not a
    model's. :class:`~kg_fuse.server.storage.store.StoreError` if it cannot be read."""
    raw = read_setting_at(db, MODEL_KEY)
    try:
        record = json.loads(raw) if raw else None
    except ValueError:
        return None
    name = record.get("name") if isinstance(record, dict) else None
    return str(name) if name else None


def stored_name(store: Store) -> str | None:
    """The name of the model the store's vectors were made by (None: no vectors yet)."""
    record = stored(store)
    return None if record is None else str(record["name"])


def reembed_command(name: str, data_dir_option: str = "") -> str:
    return f"kg-fuse index --model {name}{data_dir_option}"


def check(store: Store, spec: ModelSpec, data_dir_option: str = "") -> None:
    """Refuse a store whose vectors another model made; record the model otherwise."""
    record = stored(store)
    want = describe(spec)
    if record is not None:
        if record.get("mixed"):
            raise ModelMismatch(
                f"the store at {store.path} holds vectors of several models "
                f"({', '.join([record['name'], *record['mixed']])})",
                hint=f"re-embed it with one: {reembed_command(spec.name, data_dir_option)}")
        differs = record["name"] != spec.name or any(
            record.get(key) not in (None, want[key]) for key in ("dimensions", "digest"))
        if differs:
            made = record["name"]
            if record.get("digest") and record["name"] == spec.name:
                made += " (other weights)"
            raise ModelMismatch(
                f"the store at {store.path} was embedded by {made}, not {spec.name}: "
                "vectors of two models cannot be searched together",
                hint=f"re-embed it with {spec.name}: "
                     f"{reembed_command(spec.name, data_dir_option)} (the old store serves "
                     f"until the new one is complete), or serve it with --model {made}")
        if record == want:
            return
        log.info("recording the store's model: %s", spec.name)
    store.set_setting(MODEL_KEY, json.dumps(want))
