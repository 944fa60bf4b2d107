"""Every scenario of the live tier (``tests.helpers.platform_scenarios``), replayed from
the platform's recorded answers to the kernel-free filesystem: the client must parse the
platform's real JSON and the filesystem must show what the live mounts showed."""

from __future__ import annotations

import pytest
from trio.testing import MockClock

from tests.helpers.platform_scenarios import SCENARIOS
from tests.helpers.replay_platform import ReplayRunner


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_replay(replayed: ReplayRunner, clock: MockClock, name: str) -> None:
    await replayed.run(name, SCENARIOS[name])
