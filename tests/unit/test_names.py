"""File names for results and the parsing of query directory names."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kg_fuse.fs.kernel.names import (
    NAME_MAX,
    RESULT_SUFFIX,
    InvalidName,
    NameRegistry,
    decode_name,
    result_file_name,
)
from kg_fuse.fs.queries.catalog import document_file_name, ontology_file_name
from kg_fuse.fs.queries.saved import QueryDirName, parse_query_dir_name

C1_CONTROLS = "".join(chr(c) for c in range(0x80, 0xA0))
# Arbitrary text as a JSON label can carry it, minus lone surrogates and the C1 controls,
# which have their own (failing) tests below.
labels = st.text(
    alphabet=st.characters(exclude_categories=("Cs",), exclude_characters=C1_CONTROLS)
)
long_labels = st.text(
    alphabet=st.characters(
        min_codepoint=0x80, exclude_categories=("Cs",), exclude_characters=C1_CONTROLS
    ),
    min_size=100,
    max_size=400,
)
disambiguators = st.one_of(st.just(""), st.text("0123456789abcdef", min_size=1, max_size=64))


def assert_valid_result_name(name: str) -> None:
    assert "/" not in name
    assert "\0" not in name
    assert not any(unicodedata.category(ch) in ("Cc", "Cf") for ch in name), repr(name)
    assert "\u2028" not in name and "\u2029" not in name
    assert not name.startswith(".")
    assert len(name.encode("utf-8")) <= NAME_MAX
    assert name.endswith(RESULT_SUFFIX)
    assert name != RESULT_SUFFIX  # something before the suffix


@settings(max_examples=300)
@given(label=st.one_of(labels, long_labels), disambiguator=disambiguators)
def test_result_file_name_is_always_a_valid_file_name(label, disambiguator):
    assert_valid_result_name(result_file_name(label, disambiguator))


@pytest.mark.parametrize(
    "label",
    [
        "a/b",
        "/",
        "..",
        ".hidden",
        "...",
        "",
        "   ",
        "line\nbreak",
        "nul\0byte",
        "tab\there",
        "\x1b[31mred",
        "sep\u2028arator",
        "é" * 300,
        "😀" * 100,
        "x" * 1000,
        "a" * 243 + "😀",
    ],
)
def test_result_file_name_for_hostile_labels(label):
    assert_valid_result_name(result_file_name(label))


def test_result_file_name_keeps_an_ordinary_label_readable():
    assert result_file_name("Gzip compression") == "Gzip compression" + RESULT_SUFFIX


def test_long_label_is_cut_on_a_character_boundary():
    name = result_file_name("😀" * 100)
    name.encode("utf-8").decode("utf-8")  # still valid UTF-8
    assert set(name[: -len(RESULT_SUFFIX)]) == {"😀"}


def test_result_file_name_drops_c1_control_characters():
    assert_valid_result_name(result_file_name("evil\x9b31mname"))


BIDI_LABELS = ["\u202egnp.exe", "zero\u200bwidth", "\u2066isolated\u2069", "\ufeffbom",
               "soft\u00adhyphen", "\u061carabic mark", "tag\U000e0041s"]


@pytest.mark.parametrize("label", BIDI_LABELS)
def test_names_show_no_bidi_or_other_format_controls(label):
    """A label or name holding U+202E displayed reversed (``\u202egnp.exe`` as
    ``exe.png``); every name the mount shows has format characters replaced."""
    assert_valid_result_name(result_file_name(label))
    for name in (ontology_file_name(label), document_file_name(f"{label}.t\u202ext"),
                 document_file_name(label, "abc123")):
        assert not any(unicodedata.category(ch) == "Cf" for ch in name), repr(name)
    assert ontology_file_name("\u202egnp.exe") == "gnp.exe"


def test_result_file_name_survives_a_lone_surrogate_label():
    assert_valid_result_name(result_file_name("bad \ud800 label"))


# -- NameRegistry -------------------------------------------------------------------------


def test_colliding_labels_get_unique_names():
    registry = NameRegistry()
    names = [registry.name_for(f"c{i}", "Same label") for i in range(20)]
    assert len(set(names)) == 20
    for name in names:
        assert_valid_result_name(name)


def test_labels_that_clean_to_the_same_name_get_unique_names():
    registry = NameRegistry()
    labels_ = ["a/b", "a∕b", "a  b", "a\nb", "a b", "é", "e\u0301", ".x", "x"]
    names = [registry.name_for(f"id{i}", lab) for i, lab in enumerate(labels_)]
    assert len(set(names)) == len(names)


def test_name_is_stable_when_other_concepts_come_and_go():
    registry = NameRegistry()
    first = {cid: registry.name_for(cid, "Topic") for cid in ("c1", "c2", "c3")}
    # next refresh: c1 left, a newcomer with the same label arrived, order changed
    second = {cid: registry.name_for(cid, "Topic") for cid in ("c4", "c3", "c2")}
    assert second["c2"] == first["c2"]
    assert second["c3"] == first["c3"]
    assert second["c4"] not in first.values()
    assert first["c1"] == registry.name_for("c1", "Topic")


@given(
    st.lists(
        st.tuples(
            st.sampled_from([f"id{i}" for i in range(12)]),
            st.sampled_from(["A", "a/", "a\u2215", "A\n"]),
        ),
        max_size=40,
    )
)
def test_registry_names_unique_and_stable_for_any_refresh_sequence(calls):
    registry = NameRegistry()
    given_names: dict[str, str] = {}
    for cid, label in calls:
        name = registry.name_for(cid, label)
        assert given_names.setdefault(cid, name) == name
    assert len(set(given_names.values())) == len(given_names)


def test_registry_unique_even_when_labels_imitate_disambiguated_names():
    def stem(name: str) -> str:
        return name[: -len(RESULT_SUFFIX)]

    # Learn, black-box, which names "b" would be given, and plant labels that take them.
    decoys: list[str] = []
    for _ in range(3):
        probe = NameRegistry()
        for i, decoy in enumerate(decoys):
            probe.name_for(f"decoy{i}", decoy)
        probe.name_for("a", "X")
        decoys.append(stem(probe.name_for("b", "X")))
    registry = NameRegistry()
    names = [registry.name_for(f"decoy{i}", d) for i, d in enumerate(decoys)]
    names += [registry.name_for("a", "X"), registry.name_for("b", "X")]
    assert len(set(names)) == len(names)


# -- query directory names ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("compress data", QueryDirName("compress data", None)),
        ("gzip@0.8", QueryDirName("gzip", 0.8)),
        ("gzip@1", QueryDirName("gzip", 1.0)),
        ("gzip@0", QueryDirName("gzip", 0.0)),
        ("user@example", QueryDirName("user@example", None)),
        ("a@b@0.5", QueryDirName("a@b", 0.5)),
        ("  padded  ", QueryDirName("padded", None)),
        ("naïve café ☕", QueryDirName("naïve café ☕", None)),
    ],
)
def test_parse_query_dir_name(name, expected):
    assert parse_query_dir_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "x@1.5",
        "x@0.5.1",
        "@0.5",
        "   @0.5",
        "",
        "   ",
        ".hidden",
        ".",
        "line\nbreak",
        "tab\there",
        "nul\0",
        "esc\x1b[0m",
        "del\x7f",
        "sep\u2028x",
    ],
)
def test_parse_query_dir_name_rejects(name):
    with pytest.raises(InvalidName):
        parse_query_dir_name(name)


def test_parse_query_dir_name_rejects_c1_controls():
    with pytest.raises(InvalidName):
        parse_query_dir_name("evil\x9b31m")


def test_decode_name():
    assert decode_name("café".encode()) == "café"
    with pytest.raises(InvalidName):
        decode_name(b"\xff")
    with pytest.raises(InvalidName):
        decode_name(b"ok\xc3")
