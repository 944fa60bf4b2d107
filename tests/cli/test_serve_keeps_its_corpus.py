"""The README's by-hand sequence, ``kg-fuse index --modules json,csv`` then
``kg-fuse serve``, serves the store it built without a warning: before, the serve
(without ``--modules``: all of them) logged a WARNING that the store held other modules
and kept them, though nothing was wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli_errors import run
from tests.helpers.server import free_port


@pytest.mark.timeout(300)
def test_serve_without_modules_serves_the_store_s_corpus_without_a_warning(
        home_with_store: tuple[dict[str, str], Path, Path]) -> None:
    env, home, folder = home_with_store  # a store built with --modules (the small test corpus)
    started = run(["server", "start", "--data-dir", str(folder), "--port",
                   str(free_port())], env, home)
    try:
        assert started.returncode == 0, started.stderr
        log = (folder / "server/server.log").read_text()
        assert "stdlib corpus already in the store" in log, log
        assert " WARNING " not in log, log
    finally:
        run(["server", "stop", "--data-dir", str(folder)], env, home)
