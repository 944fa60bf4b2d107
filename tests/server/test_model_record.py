"""A store's model record is read in one place (``store_model/record.py``): by
``model list``'s mark and by a re-embedded copy that came too late, as by start-up; a
record kg-fuse never wrote is refused with a clear error, not read as no record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg_fuse.exits import CommandError
from kg_fuse.server.startup import reembed
from kg_fuse.server.storage.store import Store
from kg_fuse.server.store_model import record


def _store(path: Path, settings: dict[str, str]) -> Path:
    store = Store(path)
    store.set_settings(settings)
    store.seal()
    return path


@pytest.mark.parametrize(("held", "name"), [
    (json.dumps({"name": "tiny-mpnet", "dimensions": 32}), "tiny-mpnet"),
    ("{}", None),  # a copy being re-embedded: no model until its vectors exist
    (None, None),
])
def test_the_record_names_its_model_or_nothing(tmp_path: Path, held: str | None,
                                                name: str | None) -> None:
    db = _store(tmp_path / "kg.sqlite3", {} if held is None else {record.MODEL_KEY: held})
    found = record.read_at(db)
    assert (found and found.name) == name


@pytest.mark.parametrize("held", ["[1, 2]", "not json", '{"name": ""}', '{"dims": 3}'])
def test_a_record_kg_fuse_never_wrote_is_refused_naming_the_command_that_re_embeds(
        tmp_path: Path, held: str) -> None:
    db = _store(tmp_path / "kg.sqlite3", {record.MODEL_KEY: held})
    with pytest.raises(record.RecordUnreadable) as refused:
        record.read_at(db)
    assert refused.value.message.startswith(
        f"the store at {db} has an unreadable model record (embedding_model = ")
    assert refused.value.hint == "re-embed it: kg-fuse index --model all-MiniLM-L6-v2"


def test_a_copy_re_embedded_from_a_store_that_changed_since_is_removed_naming_the_model(
        tmp_path: Path) -> None:
    db = _store(tmp_path / "kg.sqlite3", {"epoch": "7"})
    ready = _store(reembed.ready_path(db), {
        reembed.SOURCE_EPOCH_KEY: "6",
        record.MODEL_KEY: json.dumps({"name": "tiny-xlmr"})})
    with pytest.raises(CommandError) as refused:
        reembed.swap_in_ready(db)
    assert "the store changed after it was re-embedded with tiny-xlmr" in \
        refused.value.message
    assert refused.value.hint == ("re-embed it again: kg-fuse index --data-dir "
                                  f"{tmp_path.parent} --model tiny-xlmr")
    assert not ready.exists() and db.exists()
