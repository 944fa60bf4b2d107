"""Session-wide fixtures: one real embedded server over the small stdlib corpus.

The repository root goes on ``sys.path`` so test modules can import ``tests.helpers``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kg_fuse.eval.sets import CORPORA_DIR  # noqa: E402
from kg_fuse.server.corpus.stdlib import SMALL_TEST_MODULES  # noqa: E402
from tests.helpers.server import KGServer  # noqa: E402
from tests.helpers.store import STORE_CACHE, built_store  # noqa: E402
from tests.helpers.zygote import Zygote  # noqa: E402


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the store before the first test that needs it, outside any test's timeout
    (a first build on a loaded machine takes minutes)."""
    if any("small_store" in getattr(item, "fixturenames", ()) for item in session.items):
        Zygote.shared()  # starts importing the server's libraries meanwhile
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"the small test corpus's store: {STORE_CACHE} "
                                "(built once, then copied; a first build takes minutes)")
        built_store(STORE_CACHE)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: only with -n
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Longest module first (``tests.helpers.schedule``), when ``--dist loadfile``."""
    if config.getoption("dist") != "loadfile":
        return None
    from tests.helpers.schedule import LongestFirst

    return LongestFirst(config, log)


@pytest.fixture(scope="session")
def small_store() -> Path:
    """A built, calibrated store of ``SMALL_TEST_MODULES`` (``kg-fuse index``), made once
    and kept between sessions until the server code or the corpus changes. Never write to
    it: copy it (``tests.helpers.store.copy_store``)."""
    return built_store(STORE_CACHE)


@pytest.fixture(scope="session")
def kg_server(tmp_path_factory: pytest.TempPathFactory, small_store: Path
              ) -> Iterator[KGServer]:
    """The session's embedded server (``tests.helpers.server.KGServer``), started once.

    Serves ``SMALL_TEST_MODULES`` of the standard library, calibrated as a user's would
    be, starting from a copy of ``small_store``. Use ``kg_server.api_url``, ``.admin`` /
    ``.user`` (``{"client_id", "client_secret"}``), ``.env`` (the
    ``XDG_DATA_HOME``/``XDG_CONFIG_HOME`` a client
    needs to find the credentials file), ``.log_path`` (stderr, including the request
    log), ``.token(who)`` / ``.client(who)``. Treat it as shared: restore anything you
    change (e.g. the default threshold); for destructive tests use ``kg_server_clone``.
    """
    server = KGServer(tmp_path_factory.mktemp("kg-server"), modules=SMALL_TEST_MODULES,
                      seed=small_store)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kg_server_clone(kg_server: KGServer, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[Callable[..., KGServer]]:
    """Factory: a started server over a copy of ``kg_server``'s store (no rebuild).

    Keyword arguments go to ``KGServer`` (``extra_args``, ``env``). Stopped at the end
    of the session.
    """
    started: list[KGServer] = []

    def make(**kwargs: object) -> KGServer:
        clone = kg_server.clone(tmp_path_factory.mktemp("kg-server-clone"), **kwargs)
        started.append(clone)
        return clone.start()

    yield make
    for server in started:  # all at once: each takes a moment to shut down
        if server.process is not None and server.process.poll() is None:
            server.process.terminate()
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def kg_scratch_server(kg_server_clone: Callable[..., KGServer]) -> KGServer:
    """One copy of ``kg_server`` shared by the modules whose tests add content only in
    ontologies of their own making and delete them (with their documents) afterwards, so
    the next test finds the store as it was: one server start instead of one per module.
    Never change its default or stop it; a test that must, takes ``kg_server_clone``."""
    return kg_server_clone()


@pytest.fixture(scope="module")
def kitchen_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KGServer]:
    """The kitchen handbook alone, built and calibrated from nothing as a user's is."""
    server = KGServer(tmp_path_factory.mktemp("kitchen-server"), corpus="none",
                      extra_args=["--ingest", str(CORPORA_DIR / "kitchen")])
    server.start()
    yield server
    server.stop()
