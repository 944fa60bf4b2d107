"""Mounted: `.meta/threshold` through the shell: every write style, the shell's error, `sed -i`,
and what the server is sent. What a write commits or refuses, and what `ls` then shows, is
checked without a kernel in ``tests/core/test_core_controls.py``."""

from __future__ import annotations

import os
import subprocess
import tomllib

import pytest

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

QUERY = "compress data with gzip"


def value_line(path) -> str:
    return path.read_text().splitlines()[-1]


def settings(mount: Mount, query: str = QUERY) -> dict:
    return tomllib.loads(mount.path(query, ".meta", "query.toml").read_text())


def results(mount: Mount, query: str = QUERY) -> list[str]:
    return sorted(n for n in os.listdir(mount.path(query)) if n.endswith(".concept.md"))


@pytest.fixture
def query(mounted: Mount):
    mounted.path(QUERY).mkdir()
    return mounted.path(QUERY, ".meta", "threshold")


def sh(command: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=30)


@pytest.mark.parametrize(
    "command",
    [
        "echo 0.7 > threshold",
        "printf 0.7 > threshold",
        "echo 0.7 | tee threshold > /dev/null",
        "truncate -s 0 threshold && printf 0.7 > threshold",
        "sed -i 's/^inherit$/0.7/' threshold",
        "echo 0.7 >> threshold",
        # nano-style: read, edit the value line, rewrite the whole file in place
        "python3 -c \"import sys; p='threshold'; t=open(p).read();"
        " open(p,'w').write(t.replace('\\ninherit\\n', '\\n0.7\\n'))\"",
    ],
)
def test_every_write_style_overrides(mounted, query, command) -> None:
    result = sh(command, query.parent)
    assert result.returncode == 0, result.stderr
    assert value_line(query) == "0.7"
    assert settings(mounted)["threshold"] == 0.7


def test_truncate_alone_goes_back_to_inheriting(mounted, query) -> None:
    query.write_text("0.7\n")
    assert sh("truncate -s 0 threshold", query.parent).returncode == 0
    assert value_line(query) == "inherit"


def test_shell_reports_invalid_argument(mounted, query) -> None:
    result = sh("echo banana > threshold", query.parent)
    assert result.returncode != 0
    assert "Invalid argument" in result.stderr
    assert value_line(query) == "inherit"


def test_sed_with_an_invalid_result_is_refused(mounted, query) -> None:
    query.write_text("0.66\n")
    result = sh("sed -i 's/^0.66$/banana/' threshold", query.parent)
    assert result.returncode != 0
    assert value_line(query) == "0.66"


def test_searches_omit_min_similarity_when_inheriting_and_send_an_override(
    mounted, query, kg_admin
) -> None:
    earlier = len(kg_admin.search_log(QUERY))  # other tests searched this text too
    results(mounted)
    inherited = kg_admin.search_log(QUERY)[earlier:]
    assert inherited and all(line["min_similarity"] == "omitted" for line in inherited)
    query.write_text("0.61\n")
    results(mounted)
    sent = kg_admin.search_log(QUERY)[earlier + len(inherited):]
    assert sent and all(line["min_similarity"] == "0.61" for line in sent)


def test_presets_are_the_servers_and_follow_its_default(mount_factory, kg_admin) -> None:
    """An ordinary user's mount uses the presets the server publishes with its default,
    and picks up new ones when an administrator changes the default."""
    import time

    mount = mount_factory(extra_args=["--max-age", "1", "--poll-interval", "1"])
    mount.path(QUERY).mkdir()
    threshold = mount.path(QUERY, ".meta", "threshold")
    threshold.write_text("exact\n")
    config = kg_admin.http.get("/admin/config/search-threshold").json()
    exact = config["presets"]["exact"]
    results(mount)  # the listing's search reports the default and its presets
    text = threshold.read_text()
    assert text.splitlines()[-1] == "exact"
    assert "derives them from its calibration" in text and "(+0.10)" not in text
    assert f"# Effective threshold: {exact!r} (preset exact)" in text.splitlines()
    assert f"exact = {exact!r}, comprehensive = {config['presets']['comprehensive']!r}" \
        in text
    with kg_admin.default_set_to(0.9):
        deadline = time.monotonic() + 30
        while "Effective threshold: 0.95 (preset exact)" not in threshold.read_text():
            assert time.monotonic() < deadline, threshold.read_text()
            os.listdir(mount.path(QUERY))
            time.sleep(0.3)
        assert "Server default: 0.9" in threshold.read_text()
