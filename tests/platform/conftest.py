"""The live tier: real kg-fuse mounts of a real knowledge-graph platform
(``tests.helpers.live_platform``).

The platform is found as ``tests.helpers.kg_platform`` says (``KG_PLATFORM_URL`` and
friends, ``KG_PLATFORM_ENV``, or the file ``./scripts/platform.sh up`` writes); without
one every test here is skipped, saying so. The mounts reach it through the recording
proxy, and each scenario's exchanges are written to
``tests/replay/recordings/<scenario>.json`` for the replay tier.

Once per session: three personal OAuth clients (the admin's and the contributor's
mounts, and the test's own control calls as the admin), and two ontologies named for
the session, filled by the ``ingest`` scenario through a mount; at the end the
ontologies and clients are deleted and the default threshold is put back as it was.

Run this tier alone with ``pytest -m platform``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from tests.helpers.kg_platform import (
    PersonalClient,
    PlatformAdmin,
    find_platform,
    session_token,
)
from tests.helpers.live_platform import LiveRunner, LiveSession, run_live
from tests.helpers.mount import fuse_available
from tests.helpers.platform_scenarios import Names, ingest
from tests.helpers.recorder import Recorder

PLATFORM_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mine = [item for item in items if PLATFORM_DIR in item.path.parents]
    for item in mine:
        item.add_marker(pytest.mark.platform)
    if not mine:
        return
    found = find_platform()
    reason = found if isinstance(found, str) else None
    if reason is None and not fuse_available():
        reason = "the live tier mounts: it needs /dev/fuse and fusermount3"
    if reason is not None:
        for item in mine:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def live_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSession]:
    found = find_platform()
    if isinstance(found, str):
        pytest.skip(found)
    clients: dict[str, PersonalClient] = {}
    recorder = Recorder(found.url).start()
    admin: PlatformAdmin | None = None
    setting: float | None = None
    names = Names(session_token())
    session: LiveSession | None = None
    try:
        for who, role in (("admin", "admin"), ("contributor", "contributor"),
                          ("control", "admin")):
            clients[who] = PersonalClient.create(found, role, f"{who} {names.token}")
            recorder.name_client(clients[who].client_id, who, clients[who].client_secret)
        admin = PlatformAdmin(clients["control"])
        setting = admin.default_setting()
        session = LiveSession(found, names, recorder, clients,
                              tmp_path_factory.mktemp("platform"))
        yield session
    finally:
        recorder.close()
        if admin is not None:
            now = admin.default_setting()
            if session is not None and now != setting and now in session.defaults_put:
                admin.restore_default(setting)  # a scenario stopped before it put it back
            for ontology in (names.kitchen, names.engine):
                admin.delete_ontology(ontology)
            admin.close()
        for client in reversed(list(clients.values())):
            client.delete()


@pytest.fixture(scope="session")
def ingested(live_session: LiveSession, tmp_path_factory: pytest.TempPathFactory
             ) -> LiveSession:
    """The session's ontologies, filled through a mount (the ``ingest`` scenario)."""
    if not live_session.ingested and live_session.ingest_failure is None:
        try:
            trio.run(run_live, live_session, tmp_path_factory.mktemp("ingest"), ingest)
            live_session.ingested = True
        except (Exception, pytest.fail.Exception) as exc:  # noqa: BLE001 - test_ingest reports it
            live_session.ingest_failure = exc
    return live_session


@pytest.fixture
async def live(ingested: LiveSession, tmp_path: Path) -> AsyncIterator[LiveRunner]:
    if ingested.ingest_failure is not None:
        pytest.fail(f"the session's ingest failed: {ingested.ingest_failure!r}")
    yield LiveRunner(ingested, tmp_path)
