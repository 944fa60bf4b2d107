"""The store's model, owned in one place: :class:`StoreModel`.

Made over a store and the embedder chosen for it (:func:`chosen`: the one asked for, or
the one the store records), it refuses a store another model embedded, records the model
in a new one, and keeps the pairs' measurement (:mod:`.pairs`): the score scale the
searcher maps cosines by and the grade the commands show, measured once per store and
model and kept in the record, so a status never measures again.
"""

from __future__ import annotations

import dataclasses
import logging

from kg_fuse.exits import CommandError
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.embedding.models import ModelSpec, resolve
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model import record as records
from kg_fuse.server.store_model.grade import Grade
from kg_fuse.server.store_model.pairs import RECIPE, Measurement, measure
from kg_fuse.server.store_model.record import ModelRecord
from kg_fuse.server.store_model.scale import IDENTITY, ScoreScale

log = logging.getLogger(__name__)


class ModelMismatch(CommandError):
    """The store was embedded by another model than the one asked for."""


def chosen(store: Store, asked: str | None) -> ModelSpec:
    """The model to open ``store`` with: ``asked``, else the one its record names (a
    store with none: the default model)."""
    if asked is not None:
        return resolve(asked)
    held = records.read(store)
    return resolve(None if held is None else held.name)


class StoreModel:
    """The model of one store: its record, its embedder (prompts applied), and its
    measurement (scale and grade)."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._record = self._checked(records.read(store))

    # -- who it is ---------------------------------------------------------------------

    @property
    def spec(self) -> ModelSpec:
        return self.embedder.spec

    @property
    def name(self) -> str:
        return self.embedder.name

    def _checked(self, held: ModelRecord | None) -> ModelRecord:
        """``held``, or the spec's record for a store with none; a store another model
        embedded is refused, naming the command that re-embeds it."""
        want = ModelRecord.of(self.spec)
        if held is not None:
            self._refuse_other(held)
            if held.identity() == want.identity():
                return held
            log.info("recording the store's model: %s", self.name)
        records.write(self.store, want)
        return want

    def _refuse_other(self, held: ModelRecord) -> None:
        command = records.reembed_command(self.name, self.store.path)
        if held.mixed:
            raise ModelMismatch(
                f"the store at {self.store.path} holds vectors of several models "
                f"({', '.join([held.name, *held.mixed])})",
                hint=f"re-embed it with one: {command}")
        if not held.same_model(ModelRecord.of(self.spec)):
            if held.name == self.name:  # the same name, other weights: nothing serves both
                raise ModelMismatch(
                    f"the store at {self.store.path} was embedded by other weights of "
                    f"{self.name} than those installed now",
                    hint=f"re-embed it with the weights installed: {command}")
            raise ModelMismatch(
                f"the store at {self.store.path} was embedded by {held.name}, not "
                f"{self.name}: vectors of two models cannot be searched together",
                hint=f"re-embed it with {self.name}: {command} (the old store serves "
                     f"until the new one is complete), or serve it with its own model: "
                     f"{records.serve_command(held.name, self.store.path)}")

    @property
    def record(self) -> ModelRecord:
        """What the store records of it (the measurement too, once made)."""
        return self._record

    # -- what was measured of it -------------------------------------------------------

    @property
    def measurement(self) -> Measurement | None:
        held = self._record.measured
        return held if held is not None and held.recipe == RECIPE else None

    @property
    def scale(self) -> ScoreScale:
        """The line the search maps this model's cosines by (the identity until
        measured: :meth:`measure`)."""
        held = self.measurement
        return IDENTITY if held is None else held.scale

    @property
    def grade(self) -> Grade | None:
        held = self.measurement
        return None if held is None else held.grade

    def measure(self) -> tuple[Measurement, bool]:
        """The measurement: recorded, or made now (loading the model) and recorded.
        Returns it and whether it was made now."""
        held = self.measurement
        if held is not None:
            return held, False
        made = measure(self.embedder.encode_queries, self.embedder.encode, self.name)
        scale, grade = made.scale, made.grade
        log.info("score scale of %s: unrelated pairs %.3f, related %.3f -> gain %.3f, "
                 "offset %.3f%s", self.name, scale.unrelated, scale.related, scale.gain,
                 scale.offset, " (the reference model's own)" if scale.identity else "")
        log.info("grade of %s: %s", self.name, grade.summary())
        self._record = dataclasses.replace(self._record, measured=made)
        records.write(self.store, self._record)
        return made, True

    def warning(self) -> str | None:
        """The warning its grade gives (None: none, or not measured)."""
        grade = self.grade
        return None if grade is None else grade.warning(self.name)
