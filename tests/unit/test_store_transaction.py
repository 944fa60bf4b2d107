"""A store's write transaction under Ctrl-C: an interrupt inside it leaves nothing
written, and an interrupt that lands once it has ended surfaces as itself (it surfaced
as SQLite's "cannot rollback - no transaction is active", so ``index --model`` stopped
by Ctrl-C exited 1 with that message instead of 130)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kg_fuse.server.storage.store import Store

SET = "INSERT INTO settings(key, value) VALUES ('probe', 'written')"


def test_an_interrupt_inside_the_transaction_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "kg.sqlite3")
    with pytest.raises(KeyboardInterrupt), store.transaction() as conn:
        conn.execute(SET)
        raise KeyboardInterrupt
    assert store.get_setting("probe") is None
    with store.transaction() as conn:  # the store is usable: nothing was left open
        conn.execute(SET)
    assert store.get_setting("probe") == "written"


def test_an_interrupt_once_the_transaction_ended_surfaces_as_itself(tmp_path: Path) -> None:
    store = Store(tmp_path / "kg.sqlite3")
    with pytest.raises(KeyboardInterrupt), store.transaction() as conn:
        conn.execute(SET)
        conn.execute("COMMIT")  # as when the signal arrives just after the commit
        raise KeyboardInterrupt
    assert store.get_setting("probe") == "written"
