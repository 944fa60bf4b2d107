"""Mount options are checked before anything is mounted: a timing that is not a finite
number of seconds above its floor, or half a client (``--client-id`` without its secret
file, or the reverse), is refused in one line with a hint, exit code 2, and nothing is
mounted. Each of these used to mount: ``--poll-interval -1`` said "mounted" and the mount
died two seconds later, ``--poll-interval 0`` asked the server a thousand times a second,
``--timeout 0`` made every ``ls`` fail, and ``--client-id X`` alone was ignored (the
mount took the server's own credentials without a word)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kg_fuse import exits
from tests.cli.test_cli_errors import run
from tests.helpers.mount import fuse_available
from tests.helpers.server import free_port

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse")]

REFUSED = [
    (["--poll-interval", "-1"], "--poll-interval -1: it must be a number of seconds, at least 0.1"),
    (["--poll-interval", "0"], "--poll-interval 0: "),
    (["--poll-interval", "0.01"], "at least 0.1"),
    (["--poll-interval", "nan"], "--poll-interval nan"),
    (["--timeout", "0"], "--timeout 0: "),
    (["--timeout", "inf"], "--timeout inf"),
    (["--max-age", "-5"], "--max-age -5"),
    (["--probe-timeout", "0"], "--probe-timeout 0"),
    (["--ingest-delay", "-1"], "--ingest-delay -1: it must be a number of seconds, more than 0"),
    (["--client-id", "someone"], "--client-id needs --client-secret-file"),
    (["--client-secret-file", "file.txt"], "--client-secret-file needs --client-id"),
]


@pytest.fixture
def credentialed(home: tuple[dict[str, str], Path]) -> Iterator[tuple[dict[str, str], Path]]:
    """A home whose embedded server's credentials file exists (its server is not
    running: a mount starts anyway, and catches up when it answers), so a mount that is
    not refused mounts; whatever a test leaves mounted is unmounted."""
    env, where = home
    credentials = Path(env["XDG_CONFIG_HOME"]) / "kg-fuse/server-credentials.json"
    credentials.parent.mkdir(parents=True)
    credentials.write_text(json.dumps({
        "api_url": f"http://127.0.0.1:{free_port()}",
        "admin": {"client_id": "admin-1", "client_secret": "a" * 32},
        "user": {"client_id": "user-1", "client_secret": "u" * 32}}))
    yield env, where
    if os.path.ismount(where / "empty"):
        subprocess.run(["fusermount3", "-u", "-z", str(where / "empty")], check=False)


@pytest.mark.parametrize(("options", "says"), REFUSED, ids=[" ".join(o) for o, _ in REFUSED])
def test_a_bad_mount_option_is_refused_and_nothing_is_mounted(
        credentialed: tuple[dict[str, str], Path], options: list[str], says: str) -> None:
    env, home = credentialed
    result = run(["mount", "empty", *options], env, home)
    assert not os.path.ismount(home / "empty"), result.stdout
    assert result.returncode == exits.USAGE, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kg-fuse: "), result.stderr
    assert says in lines[0] and "(hint: " in lines[0], lines[0]


def test_the_lowest_timings_allowed_mount(credentialed: tuple[dict[str, str], Path]) -> None:
    """The floors themselves are accepted: the check refuses only what cannot work."""
    env, home = credentialed
    result = run(["mount", "empty", "--poll-interval", "0.1", "--max-age", "0.1",
                  "--timeout", "0.1", "--probe-timeout", "0.1", "--ingest-delay", "0.01"],
                 env, home)
    assert result.returncode == 0, result.stderr
    assert os.path.ismount(home / "empty")
    assert run(["unmount", "empty"], env, home).returncode == 0
