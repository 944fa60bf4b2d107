"""What "a server" is for saved queries: the identity the embedded server keeps in its
store (kept across a restart and a re-embed, new for a copy elsewhere), else the
normalised address; and queries made before any server answered, given to the first
one without overwriting its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kg_fuse.fs.queries.saved import SavedQuery, StoreState
from kg_fuse.fs.queries.servers import ServerStores, identify, normalised_url
from kg_fuse.server.storage.store import Store


@pytest.mark.parametrize(("given", "same_as"), [
    ("http://127.0.0.1:8765/", "http://127.0.0.1:8765"),
    ("HTTP://Example.ORG:80/api/", "http://example.org/api"),
    ("https://example.org:443", "https://example.org"),
    ("http://[::1]:8765", "http://[::1]:8765"),
])
def test_one_address_spelt_two_ways_is_one_server(given: str, same_as: str) -> None:
    assert identify(given, None) == identify(same_as, None)


def test_another_port_or_path_is_another_address() -> None:
    assert normalised_url("http://h:8765") != normalised_url("http://h:8766")
    assert normalised_url("http://h/a") != normalised_url("http://h/b")


def test_a_reported_identity_wins_over_the_address() -> None:
    assert identify("http://a:1", "x1") == identify("http://b:2", "x1")
    assert identify("http://a:1", "x1") != identify("http://a:1", "x2")
    assert identify("http://a:1", "x1").folder != identify("http://a:1", None).folder


def test_the_store_keeps_its_identity_until_it_answers_from_elsewhere(tmp_path: Path) -> None:
    db = tmp_path / "server" / "kg.sqlite3"
    store = Store(db)
    made = store.server_id()
    assert store.server_id() == made
    store.close()
    store = Store(db)  # a restart
    assert store.server_id() == made
    store.copy_to(tmp_path / "copy.sqlite3")  # a copy elsewhere: another server
    copy = Store(tmp_path / "copy.sqlite3")
    assert copy.server_id() != made
    copy.close()
    # a re-embed: a copy built beside the store, renamed over it
    store.copy_to(tmp_path / "server" / "rebuilt.sqlite3")
    store.close()
    os.replace(tmp_path / "server" / "rebuilt.sqlite3", db)
    store = Store(db)
    assert store.server_id() == made
    store.close()


def test_queries_made_before_any_server_answered_never_overwrite_its_own(
        tmp_path: Path) -> None:
    stores = ServerStores(tmp_path, "http://127.0.0.1:8765")
    server = stores.identify("abc")
    stores.store(server).save(StoreState({"gzip": SavedQuery(("gzip",), "gzip", 0.5)}))
    provisional = stores.open_for(answered=False, server_id=None)
    assert provisional.provisional and provisional.store is not None
    provisional.state.queries.update({
        "gzip/levels": SavedQuery(("gzip", "levels"), "levels"),  # in the clashing one
        "gzip": SavedQuery(("gzip",), "gzip", 0.9),
        "tar": SavedQuery(("tar",), "tar"),
    })
    opened = stores.open(server)
    clashes = stores.adopt(provisional.state, opened)
    assert clashes == ["gzip", "gzip/levels"]
    assert opened.state.queries["gzip"].threshold == 0.5  # its own stays
    assert sorted(opened.state.queries) == ["gzip", "tar"]
    stores.settle_provisional(provisional.store, StoreState(
        {k: provisional.state.queries[k] for k in clashes}))
    assert sorted(provisional.store.load().queries) == clashes  # kept, not lost


def test_a_mount_that_never_heard_its_server_leaves_its_queries_to_the_next_that_does(
        tmp_path: Path) -> None:
    stores = ServerStores(tmp_path, "http://127.0.0.1:8765")
    early = stores.open_for(answered=False, server_id=None)  # unmounted before it answered
    assert early.store is not None
    early.store.save(StoreState({"tar": SavedQuery(("tar",), "tar", 0.3)}))
    opened = stores.open_for(answered=True, server_id="abc")
    assert list(opened.state.queries) == ["tar"]
    assert list(stores.store(stores.identify("abc")).load().queries) == ["tar"]
    assert not early.store.path.exists()
    assert stores.open_for(answered=True, server_id="xyz").state.queries == {}  # not twice
