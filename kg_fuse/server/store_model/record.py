"""What a store records of its model, read and written here alone: name, dimensions, the
digest of its weights, pooling, normalisation, prompts, and the pairs' measurement once
it is made (:mod:`.pairs`), all in one setting (``embedding_model``).

A store from before the record names its model in every vector row
(``concept_views.model``), and is recorded at its next start. A record that cannot be
read is refused with :class:`RecordUnreadable`, naming the command that re-embeds the
store: its vectors' model is unknown.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kg_fuse import paths
from kg_fuse.exits import CommandError
from kg_fuse.server.embedding.models import DEFAULT_MODEL, ModelSpec
from kg_fuse.server.storage import search_rows
from kg_fuse.server.storage.store import Store, read_setting_at
from kg_fuse.server.store_model.grade import REFERENCE, Grade
from kg_fuse.server.store_model.pairs import Measurement
from kg_fuse.server.store_model.scale import ScoreScale

log = logging.getLogger(__name__)

MODEL_KEY = "embedding_model"
#: What an earlier version kept apart: the score scale alone (measured again now, with
#: the grade, into the record; the row is removed then).
LEGACY_SCALE_KEY = "search_score_scale"
#: The record of a copy being re-embedded: no model until its vectors exist.
NO_MODEL = "{}"


class RecordUnreadable(CommandError):
    """The store's model record is not one kg-fuse wrote."""


@dataclass(frozen=True)
class ModelRecord:
    """Which model made a store's vectors, and what was measured of it there."""

    name: str
    dimensions: int | None = None
    digest: str | None = None
    pooling: str | None = None
    normalize: bool | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    measured: Measurement | None = None
    legacy: bool = False  # read from the vectors' rows: a store from before the record
    mixed: tuple[str, ...] = ()  # other models the vectors' rows name

    @classmethod
    def of(cls, spec: ModelSpec) -> ModelRecord:
        return cls(name=spec.name, dimensions=spec.dimensions, digest=spec.digest,
                   pooling=spec.pooling, normalize=spec.normalize,
                   prompts={"query": spec.prompts.query, "document": spec.prompts.document})

    def same_model(self, other: ModelRecord) -> bool:
        """The same weights (a field either record lacks is not held against it)."""
        return self.name == other.name and all(
            mine in (None, theirs) for mine, theirs in
            ((self.dimensions, other.dimensions), (self.digest, other.digest)))

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "dimensions": self.dimensions, "digest": self.digest,
                "pooling": self.pooling, "normalize": self.normalize,
                "prompts": self.prompts}

    def graded(self) -> str:
        """The model and its grade, in words (:class:`~.grade.Grade`), or that none is
        recorded yet (a store built before the grade was)."""
        if self.measured is None:
            return (f"{self.name}: grade not recorded yet (a store built before models were "
                    "graded: the server's next start or kg-fuse calibrate records it)")
        against = "" if REFERENCE.startswith(f"{self.name}:") else f" ({REFERENCE})"
        return f"{self.name}: {self.measured.grade.summary()}{against}"

    def to_json(self) -> str:
        held = self.identity()
        if self.measured is not None:
            held["measured"] = asdict(self.measured)
        return json.dumps(held)


def _measured(held: Any) -> Measurement | None:
    """The measurement a record keeps; None for none, or for one of an older shape
    (measured again)."""
    if not isinstance(held, dict):
        return None
    try:
        return Measurement(scale=ScoreScale(**held["scale"]), grade=Grade(**held["grade"]),
                           recipe=str(held["recipe"]))
    except (KeyError, TypeError):
        return None


def parse(raw: str | None, where: Path) -> ModelRecord | None:
    """The record in ``raw`` (None: no record, or a copy's empty one);
    :class:`RecordUnreadable` for anything else kg-fuse never writes."""
    if raw is None:
        return None
    try:
        held = json.loads(raw)
    except ValueError:
        held = None
    if held == {}:
        return None
    name = held.get("name") if isinstance(held, dict) else None
    prompts = held.get("prompts", {}) if isinstance(held, dict) else None
    if not isinstance(name, str) or not name or not isinstance(prompts, dict):
        raise RecordUnreadable(
            f"the store at {where} has an unreadable model record ({MODEL_KEY} = "
            f"{raw[:60]!r}): which model made its vectors is unknown",
            hint=f"re-embed it: {reembed_command(DEFAULT_MODEL, where)}")
    return ModelRecord(
        name=name, dimensions=held.get("dimensions"), digest=held.get("digest"),
        pooling=held.get("pooling"), normalize=held.get("normalize"), prompts=prompts,
        measured=_measured(held.get("measured")))


def read(store: Store) -> ModelRecord | None:
    """The store's record; for a store from before the record, the model its vectors
    name (``legacy``); None for a store with no vectors and no record."""
    record = parse(store.get_setting(MODEL_KEY), store.path)
    if record is not None or store.get_setting(MODEL_KEY) == NO_MODEL:
        return record
    models = search_rows.embedded_models(store)
    if not models:
        return None
    return ModelRecord(name=models[0], legacy=True, mixed=tuple(models[1:]))


def read_at(db: Path) -> ModelRecord | None:
    """The record of the store file at ``db``, read without opening the store (a running
    server may hold it). :class:`~kg_fuse.server.storage.store.StoreError` if the file
    cannot be read, :class:`RecordUnreadable` if the record cannot."""
    return parse(read_setting_at(db, MODEL_KEY), db)


def write(store: Store, record: ModelRecord) -> None:
    store.set_setting(MODEL_KEY, record.to_json())
    if record.measured is not None:
        store.delete_settings([LEGACY_SCALE_KEY])


def forget(store: Store) -> None:
    """No model until the store's vectors exist again (a copy being re-embedded)."""
    store.set_setting(MODEL_KEY, NO_MODEL)
    store.delete_settings([LEGACY_SCALE_KEY])


def data_dir_option(db: Path) -> str:
    """`` --data-dir DIR`` for the data directory whose store is ``db`` (nothing for the
    default one, or for a store outside any data directory)."""
    db = db.resolve()
    base = db.parent.parent
    return paths.data_dir_args(base) if paths.server_db_path(base) == db else ""


def reembed_command(name: str, db: Path) -> str:
    return f"kg-fuse index --model {shlex.quote(name)}{data_dir_option(db)}"


def serve_command(name: str, db: Path) -> str:
    return f"kg-fuse serve --model {shlex.quote(name)}{data_dir_option(db)}"
