"""The control files' parsers: linear, bounded, and every refusal a ValueError (EINVAL)."""

from __future__ import annotations

import time

import pytest

from kg_fuse.fs.tree.meta.values import MAX_TERMS, InvalidSetting, parse_limit, parse_terms


@pytest.mark.parametrize("text", [b"9" * 5000, b"0" * 5000 + b"1001", b"1" + b"0" * 4400])
def test_huge_numbers_are_out_of_range_not_a_crash(text):
    with pytest.raises(InvalidSetting) as exc:
        parse_limit(text)
    assert len(str(exc.value)) < 120  # the message (and so the log) holds a prefix only


def test_leading_zeros_still_parse():
    assert parse_limit(b"0007\n") == 7


def test_many_distinct_terms_are_refused_after_the_limit_without_reading_on():
    text = "".join(f"term{i}\n" for i in range(200_000)).encode()
    started = time.perf_counter()
    with pytest.raises(InvalidSetting, match=f"more than {MAX_TERMS}"):
        parse_terms(text)
    # the old list-based de-duplication was quadratic: minutes for this input
    assert time.perf_counter() - started < 2.0


def test_duplicates_are_dropped_in_order():
    assert parse_terms(b"b\na\nb\n\na\n") == ("b", "a")


def test_non_breaking_space_inside_a_term_is_fine_but_controls_are_not():
    assert parse_terms("a\u00a0b\n".encode()) == ("a\u00a0b",)
    with pytest.raises(InvalidSetting):
        parse_terms("a\u200bb\n".encode())  # zero-width space, category Cf
