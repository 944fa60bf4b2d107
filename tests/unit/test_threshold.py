"""Threshold resolution, the creation-time floor rule and parsing ``.meta/threshold``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kg_fuse.fs.queries.saved import SavedQuery
from kg_fuse.fs.tree.meta.status import threshold_file
from kg_fuse.fs.tree.meta.values import parse_threshold_file
from kg_fuse.listing.thresholds import (
    AutoAdjustment,
    InvalidThreshold,
    ThresholdSource,
    auto_adjustable,
    effective_threshold,
    floor_adjust,
)
from tests.unit.explain import explain_one

unit_interval = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)

# -- effective_threshold ------------------------------------------------------------------


def test_inheriting_query_uses_server_default_and_omits_the_field():
    eff = effective_threshold(None, None, 0.47)
    assert eff.value == 0.47
    assert eff.source is ThresholdSource.SERVER_DEFAULT
    assert eff.min_similarity is None


def test_inheriting_query_before_the_default_is_learned_has_no_value():
    eff = effective_threshold(None, None, None)
    assert eff.value is None
    assert eff.source is ThresholdSource.SERVER_DEFAULT
    assert eff.min_similarity is None


@pytest.mark.parametrize("default", [0.47, None])
def test_override_is_sent_to_the_server(default):
    eff = effective_threshold(0.8, None, default)
    assert eff.value == 0.8
    assert eff.source is ThresholdSource.OVERRIDE
    assert eff.min_similarity == 0.8


def test_auto_adjusted_threshold_reports_its_source_and_is_sent():
    adj = floor_adjust(0.95, 0.6, 0.47)
    assert adj is not None
    eff = effective_threshold(adj.to_value, adj, 0.47)
    assert eff.source is ThresholdSource.AUTO_ADJUSTED
    assert eff.value == 0.6
    assert eff.min_similarity == 0.6


def test_auto_adjusted_back_to_inherit_is_the_server_default():
    adj = floor_adjust(0.95, 0.40, 0.47)
    assert adj is not None
    eff = effective_threshold(adj.to_value, adj, 0.47)
    assert eff.source is ThresholdSource.SERVER_DEFAULT
    assert eff.value == 0.47
    assert eff.min_similarity is None


def test_user_written_threshold_replaces_the_auto_adjustment():
    adj = AutoAdjustment(0.95, 0.6, 0.6, 0.47)
    query = SavedQuery(("q",), "q", threshold=0.6, auto_adjusted=adj)
    rewritten = query.with_threshold(0.6)
    eff = effective_threshold(rewritten.threshold, rewritten.auto_adjusted, 0.47)
    assert rewritten.auto_adjusted is None
    assert eff.source is ThresholdSource.OVERRIDE


# -- floor_adjust -------------------------------------------------------------------------


def test_floor_binds_so_the_query_goes_back_to_inheriting():
    adj = floor_adjust(0.95, 0.40, 0.47)
    assert adj is not None
    assert adj.to_value is None
    assert adj.from_value == 0.95
    assert adj.suggested == 0.40
    assert adj.server_default == 0.47


def test_suggestion_above_the_default_is_adopted():
    adj = floor_adjust(0.95, 0.6, 0.47)
    assert adj is not None
    assert adj.to_value == 0.6
    assert adj.from_value == 0.95


def test_never_raises_a_threshold_typed_below_the_default():
    assert floor_adjust(0.4, 0.3, 0.47) is None
    assert floor_adjust(0.4, 0.45, 0.47) is None


def test_no_adjustment_when_the_suggestion_is_not_lower():
    assert floor_adjust(0.6, 0.6, 0.47) is None
    assert floor_adjust(0.6, 0.7, 0.47) is None


def test_no_adjustment_while_the_default_is_unknown():
    assert floor_adjust(0.95, 0.4, None) is None  # no floor known: the query stays as typed


def test_only_a_typed_number_is_auto_adjusted():
    assert auto_adjustable(0.8)
    assert not auto_adjustable("exact") and not auto_adjustable(None)


@given(typed=unit_interval, suggested=unit_interval, default=unit_interval)
def test_floor_rule_never_goes_below_default_and_only_lowers(typed, suggested, default):
    adj = floor_adjust(typed, suggested, default)
    if adj is None:
        # Only refused when lowering is impossible without crossing the floor.
        assert max(suggested, default) >= typed
        return
    effective = default if adj.to_value is None else adj.to_value
    assert effective >= default
    assert effective < typed
    assert effective == max(suggested, default)
    assert adj.from_value == typed


# -- parse_threshold_file -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.7", 0.7),
        ("0.7\n", 0.7),
        ("  0.7  \r\n", 0.7),
        ("1", 1.0),
        ("0", 0.0),
        (".5", 0.5),
        ("1e-1", 0.1),
        ("# a comment\n\n0.25\n# another\n", 0.25),
    ],
)
def test_valid_numbers(text, expected):
    assert parse_threshold_file(text.encode()) == expected


@pytest.mark.parametrize(
    "text",
    ["inherit", "default", "INHERIT", "Default\n", "", "   ", "\n\n\t\n", "# only\n# comments\n"],
)
def test_inherit_words_and_empty_files_mean_inherit(text):
    assert parse_threshold_file(text.encode()) is None


@pytest.mark.parametrize(
    "data",
    [
        b"high",
        b"nan",
        b"NaN",
        b"inf",
        b"-0.1",
        b"1.01",
        b"2",
        b"0.5 0.6",
        b"0.5\n0.6",
        b"\xff\xfe0.5",
        b"0x1",
        b"+0.5",
        b"0.5%",
        b"inherit 0.5",
    ],
)
def test_rejected_text(data):
    with pytest.raises(InvalidThreshold):
        parse_threshold_file(data)


@given(unit_interval)
def test_any_threshold_written_plainly_parses_to_itself(value):
    assert parse_threshold_file(repr(value).encode()) == value


# -- the rendered file parses back (an editor saving it unchanged) -------------------------


def _render(query: SavedQuery, default: float | None) -> bytes:
    return threshold_file(query, explain_one(query, default))


@pytest.mark.parametrize("default", [0.47, None])
def test_rendered_file_of_inheriting_query_stays_inheriting(default):
    assert parse_threshold_file(_render(SavedQuery(("q",), "q"), default)) is None


@pytest.mark.parametrize("value", [0.0, 0.3, 0.55, 0.7, 0.825, 1.0])
def test_rendered_file_of_override_parses_back_to_its_number(value):
    assert parse_threshold_file(_render(SavedQuery(("q",), "q", threshold=value), 0.47)) == value


@given(st.integers(min_value=0, max_value=10_000))
def test_rendered_file_of_four_decimal_override_round_trips(n):
    value = n / 10_000
    assert parse_threshold_file(_render(SavedQuery(("q",), "q", threshold=value), 0.47)) == value


def test_rendered_file_of_precise_override_round_trips():
    value = 0.1234567
    assert parse_threshold_file(_render(SavedQuery(("q",), "q", threshold=value), 0.47)) == value


def test_rendered_file_of_auto_adjusted_queries_parses_back():
    to_inherit = floor_adjust(0.95, 0.40, 0.47)
    to_value = floor_adjust(0.95, 0.6, 0.47)
    assert to_inherit is not None and to_value is not None
    q1 = SavedQuery(("a",), "a", threshold=to_inherit.to_value, auto_adjusted=to_inherit)
    q2 = SavedQuery(("b",), "b", threshold=to_value.to_value, auto_adjusted=to_value)
    assert parse_threshold_file(_render(q1, 0.47)) is None
    assert parse_threshold_file(_render(q2, 0.47)) == 0.6


def test_rendered_file_mentions_the_server_default_only_in_comments():
    body = _render(SavedQuery(("q",), "q"), 0.47).decode()
    value_lines = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("#")]
    assert value_lines == ["inherit"]
    assert any("0.47" in ln for ln in body.splitlines() if ln.startswith("#"))


def test_five_thousand_digits_is_refused_with_a_short_message():
    with pytest.raises(InvalidThreshold) as exc:
        parse_threshold_file(b"9" * 5000)
    assert len(str(exc.value)) < 100
