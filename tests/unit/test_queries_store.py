"""The saved-query store: round trip, atomic 0600 writes, corrupt files kept aside."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kg_fuse.fs.queries.saved import (
    QueryStore,
    SavedQuery,
    StoreCorrupt,
    StoreInUse,
    StoreSetAside,
    StoreState,
)
from kg_fuse.listing.thresholds import AutoAdjustment, floor_adjust

HOSTILE_NAMES = [
    "compress data",
    'quote " and \' and """',
    "key = value",
    "[section]",
    "# hash",
    "line\nbreak",
    "tab\t",
    "back\\slash",
    "naïve ☕ 😀",
    "sep\u2028",
    "gzip@0.8",
    "nul\0esc\x1bdel\x7f",
]


def make_state() -> StoreState:
    state = StoreState(server_default_seen=0.47)
    to_value = floor_adjust(0.95, 0.6, 0.47)
    to_inherit = floor_adjust(0.9, 0.3, 0.47)
    assert to_value is not None and to_inherit is not None
    queries = [
        SavedQuery(("inherit",), "inherit text", created_at="2024-01-02T03:04:05+00:00"),
        SavedQuery(("explicit",), "explicit text", threshold=0.7),
        SavedQuery(("zero",), "zero", threshold=0.0),
        SavedQuery(("one",), "one", threshold=1.0),
        SavedQuery(("auto",), "auto text", threshold=to_value.to_value, auto_adjusted=to_value),
        SavedQuery(("auto-inherit",), "x", threshold=None, auto_adjusted=to_inherit),
    ]
    queries += [SavedQuery((n,), f"text of {n}", threshold=0.123456789) for n in HOSTILE_NAMES]
    for q in queries:
        state.queries[q.name] = q
    return state


def test_round_trip(tmp_path):
    state = make_state()
    QueryStore(tmp_path / "mnt").save(state)
    loaded = QueryStore(tmp_path / "mnt").load()
    assert loaded.server_default_seen == 0.47
    assert loaded.queries == state.queries


def test_missing_store_is_empty(tmp_path):
    loaded = QueryStore(tmp_path).load()
    assert loaded.queries == {}
    assert loaded.server_default_seen is None


def test_save_replaces_previous_content(tmp_path):
    store = QueryStore(tmp_path)
    store.save(make_state())
    smaller = StoreState(queries={"only": SavedQuery(("only",), "only text", threshold=0.5)})
    store.save(smaller)
    loaded = store.load()
    assert loaded.queries == smaller.queries
    assert loaded.server_default_seen is None


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1),
        st.tuples(
            st.text(alphabet=st.characters(exclude_categories=("Cs",))),
            st.one_of(st.none(), st.floats(min_value=0, max_value=1)),
        ),
        max_size=5,
    )
)
def test_round_trip_any_names(entries):
    state = StoreState(
        queries={n: SavedQuery((n,), text, threshold=t) for n, (text, t) in entries.items()}
    )
    with tempfile.TemporaryDirectory() as d:
        store = QueryStore(Path(d))
        store.save(state)
        assert store.load().queries == state.queries


def test_save_is_atomic_and_private(tmp_path):
    store = QueryStore(tmp_path)
    store.save(make_state())
    store.save(make_state())
    leftovers = {p.name for p in tmp_path.iterdir()} - {"queries.toml", "queries.toml.lock"}
    assert leftovers == set()
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600


def test_save_is_private_even_with_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        QueryStore(tmp_path).save(make_state())
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "queries.toml").st_mode) == 0o600


CORRUPT = [
    b"this is [not toml",
    b'version = 1\n[[queries]]\ntext = "no name"\n',
    b'version = 1\n[[queries]]\nname = "q"\ntext = "t"\nthreshold = 1.5\n',
    b'version = 1\n[[queries]]\nname = "q"\ntext = "t"\nthreshold = "sometimes"\n',
    b'version = 1\n[[queries]]\nname = "q"\ntext = "t"\nthreshold = true\n',
    b'version = 1\n[[queries]]\nname = "q"\ntext = "t"\nthreshold = nan\n',
    b'version = 1\n[[queries]]\nname = "q"\ntext = "t"\nauto_adjusted = 5\n',
    b"version = 1\nqueries = 5\n",
]


def assert_kept_aside(tmp_path: Path, content: bytes) -> None:
    store = QueryStore(tmp_path)
    store.path.write_bytes(content)
    with pytest.raises(StoreCorrupt) as info:
        store.load()
    kept = info.value.kept_at
    assert kept.exists()
    assert kept.read_bytes() == content
    assert str(kept) in str(info.value)


@pytest.mark.parametrize("content", CORRUPT)
def test_corrupt_store_is_kept_aside_not_deleted(tmp_path, content):
    assert_kept_aside(tmp_path, content)


@pytest.mark.parametrize(
    "content",
    [b'version = 1\nqueries = ["x"]\n', b"version = 1\nqueries = [1]\n", b"queries = {a = 1}\n"],
)
def test_store_with_non_table_entries_is_corrupt(tmp_path, content):
    assert_kept_aside(tmp_path, content)


def test_non_utf8_store_is_corrupt(tmp_path):
    assert_kept_aside(tmp_path, b'version = 1\n# \xff\xfe\n')


def test_auto_adjustment_survives_the_round_trip(tmp_path):
    adj = AutoAdjustment(0.95, None, 0.4, 0.47)
    query = SavedQuery(("q",), "q", None, "2024-01-01T00:00:00+00:00", adj)
    state = StoreState(queries={"q": query})
    store = QueryStore(tmp_path)
    store.save(state)
    assert store.load().queries["q"].auto_adjusted == adj


def test_a_store_set_aside_refuses_every_later_load_until_a_choice(tmp_path):
    store = QueryStore(tmp_path)
    store.path.write_bytes(b"[[queries]\n")
    with pytest.raises(StoreCorrupt) as first:
        store.load()
    for _ in range(2):  # no store and no choice: never an empty one in its place
        with pytest.raises(StoreSetAside) as again:
            store.load()
        assert again.value.kept_at == first.value.kept_at
    with pytest.raises(ValueError, match="still unreadable"):
        store.restore(first.value.kept_at)
    assert first.value.kept_at.exists() and not store.path.exists()
    assert store.start_empty() == first.value.kept_at
    assert store.load().queries == {}
    assert first.value.kept_at.read_bytes() == b"[[queries]\n"
    with pytest.raises(StoreInUse):
        store.start_empty()
    with pytest.raises(StoreInUse):
        store.restore(first.value.kept_at)
