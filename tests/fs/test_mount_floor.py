"""Mounted: the creation-time auto-adjust and its floor, and following the server default."""

from __future__ import annotations

import os
import time
import tomllib

import pytest

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

TIGHT = "gzip compression@0.97"
TEXT = "gzip compression"


def settings(mount: Mount, query: str) -> dict:
    return tomllib.loads(mount.path(query, ".meta", "query.toml").read_text())


def results(mount: Mount, query: str) -> list[str]:
    return sorted(n for n in os.listdir(mount.path(query)) if n.endswith(".concept.md"))


def test_over_tight_threshold_is_floored_to_the_server_default(mount_factory,
                                                               kg_admin) -> None:
    probe = kg_admin.search(TEXT, min_similarity=0.97)
    assert probe["count"] == 0 and probe["near_miss_threshold"] is not None
    # the scenario: a server default above the suggestion, so the floor binds
    with kg_admin.default_set_to(round(probe["near_miss_threshold"] + 0.04, 2)):
        assert probe["near_miss_threshold"] < kg_admin.get_default()
        mount = mount_factory()
        mount.path(TIGHT).mkdir()
        toml = settings(mount, TIGHT)
        assert toml["query"] == TEXT
        assert toml["threshold"] == "inherit"
        assert toml["auto_adjusted"] is True
        assert toml["auto_adjustment"]["from"] == 0.97
        assert toml["auto_adjustment"]["to"] == "inherit"
        threshold = mount.path(TIGHT, ".meta", "threshold").read_text()
        assert "Auto-adjusted" in threshold
        assert threshold.splitlines()[-1] == "inherit"
        # the best near miss is below the default: never lowered below it, so nothing
        assert results(mount, TIGHT) == []


def test_a_suggestion_above_the_default_is_adopted(mount_factory, kg_admin) -> None:
    """Lowered to just below the best near miss (what ``.meta/status`` suggests), not to
    the contract's ``suggested_threshold``, which lists everything down to 0.3."""
    with kg_admin.default_set_to(0.1):
        probe = kg_admin.search(TEXT, min_similarity=0.97)
        suggested = probe["near_miss_threshold"]
        best = probe["near_misses"][0]["label"]
        assert probe["count"] == 0 and suggested is not None and suggested > 0.1
        mount = mount_factory()
        mount.path(TIGHT).mkdir()
        toml = settings(mount, TIGHT)
        assert toml["threshold"] == pytest.approx(suggested)
        assert toml["auto_adjusted"] is True
        assert toml["auto_adjustment"]["from"] == 0.97
        assert toml["auto_adjustment"]["to"] == pytest.approx(suggested)
        status = mount.path(TIGHT, ".meta", "status").read_text()
        assert "auto-adjusted: 0.97 -> " + f"{suggested:g}" in status
        assert f"{best}.concept.md" in results(mount, TIGHT)


def test_an_inheriting_query_never_probes(mounted, kg_admin) -> None:
    before = len(kg_admin.search_log("zipfile members"))
    mounted.path("zipfile members").mkdir()
    assert len(kg_admin.search_log("zipfile members")) == before
    assert settings(mounted, "zipfile members")["auto_adjusted"] is False


def test_a_threshold_that_finds_results_is_kept(mounted) -> None:
    mounted.path("gzip compress@0.3").mkdir()
    toml = settings(mounted, "gzip compress@0.3")
    assert toml["threshold"] == 0.3 and toml["auto_adjusted"] is False


def test_a_later_write_is_never_auto_adjusted(mounted) -> None:
    mounted.path(TEXT).mkdir()
    (mounted.path(TEXT, ".meta", "threshold")).write_text("0.97\n")
    assert results(mounted, TEXT) == []
    toml = settings(mounted, TEXT)
    assert toml["threshold"] == 0.97 and toml["auto_adjusted"] is False


def test_mkdir_with_the_server_unreachable_keeps_the_typed_threshold(
    mount_factory, kg_server
) -> None:
    mount = mount_factory(extra_args=["--api-url", "http://127.0.0.1:9"],
                          env={"KG_CLIENT_ID": "nobody", "KG_CLIENT_SECRET": "nothing"},
                          allowed_log=[r"server request failed", r"server unavailable"])
    started = time.monotonic()
    mount.path(TIGHT).mkdir()
    assert time.monotonic() - started < 5
    toml = settings(mount, TIGHT)
    assert toml["threshold"] == 0.97 and toml["auto_adjusted"] is False


def test_the_listing_and_shown_default_follow_a_new_server_default(
    mount_factory, kg_admin
) -> None:
    # An ordinary user's mount learns a new default within --max-age (its listings
    # expire and their refetch reports threshold_used); it never polls with searches.
    mount = mount_factory(extra_args=["--poll-interval", "1", "--max-age", "1"])
    mount.path(TEXT).mkdir()
    threshold = mount.path(TEXT, ".meta", "threshold")
    before = results(mount, TEXT)
    old_default = kg_admin.get_default()
    assert f"Server default: {old_default:g}" in threshold.read_text()
    with kg_admin.default_set_to(0.75):
        time.sleep(1.2)
        after = results(mount, TEXT)
        assert len(after) < len(before)
        assert "Server default: 0.75" in threshold.read_text()
        assert threshold.read_text().splitlines()[-1] == "inherit"
    time.sleep(1.2)
    assert results(mount, TEXT) == before


def test_an_idle_mount_never_searches(mount_factory, kg_admin) -> None:
    """Polling the server is a cheap GET of the epoch; the default is learned from the
    searches that run anyway, so an idle mount sends no search at all."""
    from kg_fuse.fs.queries.watcher import PROBE_TEXT

    mount = mount_factory(extra_args=["--poll-interval", "0.2", "--max-age", "0.5"])
    mount.path(TEXT).mkdir()
    assert results(mount, TEXT)
    probes = len(kg_admin.search_log(PROBE_TEXT))
    searches = len(kg_admin.search_log(TEXT))
    time.sleep(3)  # 15 polls, 6 times --max-age
    assert len(kg_admin.search_log(PROBE_TEXT)) == probes
    assert len(kg_admin.search_log(TEXT)) == searches


def wait_for_requests(kg_admin, method_path: str, count: int) -> None:
    """Until the server logged ``count`` more such requests (the mount's own pace)."""
    target = kg_admin.requests(method_path) + count
    deadline = time.monotonic() + 60  # a hang guard, not a measurement
    while kg_admin.requests(method_path) < target:
        assert time.monotonic() < deadline, f"fewer than {count} {method_path}"
        time.sleep(0.05)


def test_an_ordinary_users_mount_follows_a_put_default_within_polls_and_idles_free(
    mount_factory, kg_admin
) -> None:
    """The epoch response carries the default: a mount without the admin permission
    shows a PUT default in .meta/threshold and in its inheriting listing after the next
    poll (--max-age, 60 s, never comes into it), with no probe search; and an idle
    mount sends no search at all."""
    from kg_fuse.fs.queries.watcher import PROBE_TEXT

    poll = "GET /database/epoch"
    mount = mount_factory(extra_args=["--poll-interval", "0.5"])  # user credentials
    mount.path(TEXT).mkdir()
    threshold = mount.path(TEXT, ".meta", "threshold")
    before = results(mount, TEXT)
    assert f"Server default: {kg_admin.get_default():g}" in threshold.read_text()
    probes = len(kg_admin.search_log(PROBE_TEXT))
    with kg_admin.default_set_to(0.75):
        # the first poll logged may have read the old value while the PUT went in; the
        # third starts after the mount has handled the second
        wait_for_requests(kg_admin, poll, 3)
        assert "Server default: 0.75" in threshold.read_text()
        after = results(mount, TEXT)
        assert len(after) < len(before)
        assert kg_admin.search_log(TEXT)[-1]["threshold_used"] == "0.75"
        status = mount.path(TEXT, ".meta", "status").read_text()
        assert "server default: 0.75 (from " in status
        searches = kg_admin.requests("POST /query/search")
        wait_for_requests(kg_admin, poll, 12)  # a minute of polls at the default 5 s
        assert kg_admin.requests("POST /query/search") == searches  # idle: no search
    wait_for_requests(kg_admin, poll, 3)
    assert results(mount, TEXT) == before
    assert len(kg_admin.search_log(PROBE_TEXT)) == probes  # learned from polls alone
