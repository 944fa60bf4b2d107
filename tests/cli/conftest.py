"""The command line's fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.store import OFFLINE_ENV, copy_store


@pytest.fixture
def home(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An empty home: nothing built, no server running, no credentials."""
    home = tmp_path / "home"
    (home / "file.txt").parent.mkdir(parents=True)
    (home / "file.txt").write_text("x")
    (home / "full").mkdir()
    (home / "full" / "keep.txt").write_text("mine")
    (home / "empty").mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_STATE_HOME": str(home / "state")}
    for name in ("KG_API_URL", "KG_CLIENT_ID", "KG_CLIENT_SECRET", "KG_FUSE_DEBUG"):
        env.pop(name, None)
    return env, home


@pytest.fixture
def home_with_store(home: tuple[dict[str, str], Path], small_store: Path
         ) -> tuple[dict[str, str], Path, Path]:
    """A home with a built store (the small test corpus) in ``my data``."""
    env, where = home
    env = {**env, **OFFLINE_ENV}
    folder = where / "my data"
    copy_store(small_store, folder / "server/kg.sqlite3")
    return env, where, folder
