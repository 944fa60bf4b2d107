"""Intensity presets: parsing (file and directory suffix), values that follow the server
default, rendering of .meta/threshold, .meta/status and query.toml, persistence."""

from __future__ import annotations

import tomllib

import pytest

from kg_fuse.fs.kernel.errnos import InvalidName
from kg_fuse.fs.queries.saved import (
    SavedQuery,
    _query_from_toml,
    _query_to_toml,
    parse_query_dir_name,
)
from kg_fuse.fs.tree.meta.status import query_toml, status_file, threshold_file
from kg_fuse.fs.tree.meta.values import parse_threshold_file
from kg_fuse.listing.presets import preset_value
from kg_fuse.listing.thresholds import InvalidThreshold, ThresholdSource, effective_threshold
from tests.unit.explain import explain_one


@pytest.mark.parametrize(("text", "stored"), [
    (b"exact\n", "exact"), (b"EXACT", "exact"), (b"  comprehensive  \n", "comprehensive"),
    (b"standard\n", None), (b"# comment\nexact\n", "exact"),
])
def test_preset_words_parse(text: bytes, stored: str | None) -> None:
    assert parse_threshold_file(text) == stored


@pytest.mark.parametrize("text", [b"exactly", b"exact 0.5", b"preset", b"comprehensiv"])
def test_other_words_are_refused(text: bytes) -> None:
    with pytest.raises(InvalidThreshold):
        parse_threshold_file(text)


def test_directory_suffix_takes_a_preset() -> None:
    assert parse_query_dir_name("sort a list@exact").threshold == "exact"
    assert parse_query_dir_name("sort a list@Comprehensive").threshold == "comprehensive"
    standard = parse_query_dir_name("sort a list@standard")
    assert (standard.text, standard.threshold) == ("sort a list", None)
    assert parse_query_dir_name("mail me@example").text == "mail me@example"
    with pytest.raises(InvalidName):
        parse_query_dir_name("@exact")


def test_presets_follow_the_server_default() -> None:
    for default in (0.42, 0.5):
        exact = effective_threshold("exact", None, default)
        wide = effective_threshold("comprehensive", None, default)
        assert exact.value == exact.min_similarity == round(default + 0.10, 2)
        assert wide.value == wide.min_similarity == round(default - 0.06, 2)
        assert wide.value < default < exact.value
        assert exact.source is ThresholdSource.PRESET and exact.preset == "exact"
    assert preset_value("exact", 0.95) == 1.0 and preset_value("comprehensive", 0.03) == 0.0
    unknown = effective_threshold("exact", None, None)
    assert unknown.value is None and unknown.min_similarity is None  # server default


def test_threshold_file_shows_the_word_and_its_value() -> None:
    query = SavedQuery(("q",), "q", threshold="exact")
    text = threshold_file(query, explain_one(query, 0.47)).decode()
    lines = text.splitlines()
    assert lines[-1] == "exact"  # an unchanged save keeps the preset
    assert "# Effective threshold: 0.57 (preset exact)" in lines
    assert "exact = 0.57 (+0.10)" in text and "comprehensive = 0.41 (-0.06)" in text
    assert "noise" not in text.replace("noise floor: results", "")
    assert parse_threshold_file(text.encode()) == "exact"


def test_comprehensive_warns_in_threshold_and_status() -> None:
    query = SavedQuery(("q",), "q", threshold="comprehensive")
    threshold = threshold_file(query, explain_one(query, 0.47)).decode()
    assert "# Warning: comprehensive is below the server default" in threshold
    assert "may be noise" in threshold
    status = status_file(query, explain_one(query, 0.47), None, None).decode()
    assert "effective threshold: 0.41 (preset comprehensive)" in status
    assert any(line.startswith("warning: ") and "may be noise" in line
               for line in status.splitlines())
    exact_query = SavedQuery(("q",), "q", threshold="exact")
    exact = status_file(exact_query, explain_one(exact_query, 0.47), None, None).decode()
    assert "warning" not in exact


def test_query_toml_and_persistence_keep_the_word() -> None:
    query = SavedQuery(("q",), "q", threshold="comprehensive")
    doc = tomllib.loads(query_toml(query, explain_one(query, 0.5)).decode())
    assert doc["threshold"] == "comprehensive" and doc["preset"] == "comprehensive"
    assert doc["effective_threshold"] == 0.44
    assert _query_from_toml(_query_to_toml(query)).threshold == "comprehensive"


def test_presets_the_server_publishes_win_over_the_offsets() -> None:
    published = {"exact": 0.63, "comprehensive": 0.45}
    exact = effective_threshold("exact", None, 0.48, published)
    assert exact.value == exact.min_similarity == 0.63
    assert preset_value("comprehensive", 0.48, published) == 0.45
    assert preset_value("exact", 0.48, None) == 0.58  # an older server: the offsets
    query = SavedQuery(("q",), "q", threshold="exact")
    from kg_fuse.listing.explain import DefaultOrigin, describe_source, explain_thresholds

    explanation = explain_thresholds([query], (), (), DefaultOrigin(0.48, presets=published))
    assert explanation.own.effective == exact
    assert "published by the server" in describe_source(explanation.own,
                                                        explanation.default)
    text = threshold_file(query, explanation).decode()
    assert "# Effective threshold: 0.63 (preset exact)" in text.splitlines()
    assert "exact = 0.63, comprehensive = 0.45" in text and "calibration" in text
    assert parse_threshold_file(text.encode()) == "exact"


def test_search_response_carries_valid_presets_only() -> None:
    from kg_fuse.client.models import SearchResponse

    body = {"query": "q", "results": [], "threshold_used": 0.5}
    assert SearchResponse.parse(body).threshold_presets is None
    body["threshold_presets"] = {"exact": 0.6, "comprehensive": 0.44}
    assert SearchResponse.parse(body).threshold_presets == {"exact": 0.6, "comprehensive": 0.44}
    body["threshold_presets"] = {"exact": "high", "comprehensive": 1.5, "other": 0.1}
    assert SearchResponse.parse(body).threshold_presets is None


async def test_a_new_default_without_presets_drops_the_old_ones() -> None:
    from kg_fuse.fs.queries.watcher import ServerWatcher

    changes = []  # the values the watcher reported as changed (the invalidation is told)

    def observe(*seen: object) -> None:
        if default.observe(*seen):
            changes.append(default.value)

    default = ServerWatcher(None, ttl=60)
    observe(0.5, {"exact": 0.6, "comprehensive": 0.44})
    observe(0.5)  # a search that reported no presets: same default, keep them
    assert default.presets == {"exact": 0.6, "comprehensive": 0.44}
    observe(0.5, {"exact": 0.62, "comprehensive": 0.44})  # recalibrated
    assert changes == [0.5, 0.5]
    observe(0.7)
    assert default.presets is None and changes == [0.5, 0.5, 0.7]
    observe(None, {"exact": 0.8, "comprehensive": 0.64})  # a preset query's search
    assert default.value == 0.7 and default.presets["exact"] == 0.8
    assert changes == [0.5, 0.5, 0.7, 0.7]
    observe(None, {"exact": 0.95, "standard": 0.9, "comprehensive": 0.8})
    assert default.value == 0.9 and changes[-1] == 0.9  # standard is the default itself


def test_the_presets_seen_persist_with_the_default() -> None:
    from kg_fuse.fs.queries.saved import StoreState, dumps_state, loads_state

    state = StoreState(server_default_seen=0.5,
                       server_presets_seen={"exact": 0.6, "comprehensive": 0.44})
    again = loads_state(dumps_state(state))
    assert again.server_presets_seen == {"exact": 0.6, "comprehensive": 0.44}
    assert loads_state(dumps_state(StoreState(server_default_seen=0.5))
                       ).server_presets_seen is None


def _server(epoch_body: dict, sent: list[str]):
    """A server's answers: the epoch as given, the admin endpoint refused (a user)."""
    import httpx

    from kg_fuse.client.api import KgApiClient
    from kg_fuse.client.credentials import Credentials

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        if request.url.path.endswith("/auth/oauth/token"):
            return httpx.Response(200, json={"access_token": "t", "expires_in": 600})
        if request.url.path.endswith("/database/epoch"):
            return httpx.Response(200, json=epoch_body)
        return httpx.Response(403, json={"detail": "Permission denied"})

    return KgApiClient("http://kg.invalid", Credentials("user", "secret", "tests"),
                       transport=httpx.MockTransport(answer))


async def test_the_poll_learns_the_default_from_the_epoch_else_from_the_admin_endpoint(
) -> None:
    from kg_fuse.fs.queries.watcher import FROM_EPOCH, ServerWatcher

    sent: list[str] = []
    published = {"epoch": 3, "default_threshold": 0.4,
                 "threshold_presets": {"exact": 0.5, "standard": 0.4, "comprehensive": 0.3}}
    ours = _server(published, sent)
    default = ServerWatcher(ours, ttl=60)
    await default.poll()
    assert (default.value, default.origin.how) == (0.4, FROM_EPOCH)
    assert default.presets == published["threshold_presets"]
    assert "GET /admin/config/search-threshold" not in sent and default.fresh

    sent.clear()  # a server that publishes nothing beside the epoch (the platform)
    platform = _server({"epoch": 3}, sent)
    default = ServerWatcher(platform, ttl=60, initial=0.5)
    for _ in range(3):
        await default.poll()
    assert sent.count("GET /admin/config/search-threshold") == 1  # refused once: not again
    assert default.value == 0.5 and not default.fresh and "POST /query/search" not in sent
