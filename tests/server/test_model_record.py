"""A store's model record is read in one place (``startup/model_record.py``): by
``model list``'s mark and by a re-embedded copy that came too late, as by start-up."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg_fuse.exits import CommandError
from kg_fuse.server.startup import model_record, reembed
from kg_fuse.server.storage.store import Store


def _store(path: Path, settings: dict[str, str]) -> Path:
    store = Store(path)
    store.set_settings(settings)
    store.seal()
    return path


@pytest.mark.parametrize(("record", "name"), [
    (json.dumps({"name": "tiny-mpnet", "dimensions": 32}), "tiny-mpnet"),
    ("{}", None),  # a copy being re-embedded: no model until its vectors exist
    ("[1, 2]", None),
    ("not json", None),
    (None, None),
])
def test_the_record_names_its_model_or_nothing(tmp_path: Path, record: str | None,
                                                name: str | None) -> None:
    db = _store(tmp_path / "kg.sqlite3",
                {} if record is None else {model_record.MODEL_KEY: record})
    assert model_record.name_at(db) == name


def test_a_copy_re_embedded_from_a_store_that_changed_since_is_removed_naming_the_model(
        tmp_path: Path) -> None:
    db = _store(tmp_path / "kg.sqlite3", {"epoch": "7"})
    ready = _store(reembed.ready_path(db), {
        reembed.SOURCE_EPOCH_KEY: "6",
        model_record.MODEL_KEY: json.dumps({"name": "tiny-xlmr"})})
    with pytest.raises(CommandError) as refused:
        reembed.swap_in_ready(db)
    assert "the store changed after it was re-embedded with tiny-xlmr" in \
        refused.value.message
    assert refused.value.hint == ("re-embed it again: kg-fuse index --data-dir "
                                  f"{tmp_path.parent} --model tiny-xlmr")
    assert not ready.exists() and db.exists()
