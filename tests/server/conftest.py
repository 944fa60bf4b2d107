"""Fixtures the server tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's own data, cache and config directories (models, graphs, store)."""
    for kind in ("DATA", "CACHE", "CONFIG"):
        monkeypatch.setenv(f"XDG_{kind}_HOME", str(tmp_path / kind.lower()))
    return tmp_path
