"""Result files are cached by the kernel (names, attributes, pages), and every path that
changes a listing tells it: a name that left stops resolving at once, without an ``ls``
in between, and a file whose bytes changed is read anew with its exact size.

Each test first ``stat``s and reads the results, so the kernel holds their names and
pages, then changes the listing one way: a ``.meta`` write (threshold, limit, exclude,
union), a new server default, new server content (another client's ingest: a new
epoch), an ingest through the mount, ``rmdir``."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mount import Mount
from tests.robustness.conftest import RELEVANT, result_names, wait_until

pytestmark = pytest.mark.mount

ZEBRA = """# Zebra husbandry

Zebras need wide pastures and careful hoof trimming by a farrier.

## Feeding zebras

Feed zebras hay and fresh grass twice a day.
"""
ZEBRA_QUERY = "zebra hoof care"


def cache_in_kernel(directory: Path) -> dict[str, bytes]:
    """stat and read every result, so the kernel holds its name, attributes and pages."""
    bodies = {}
    for name in result_names(directory):
        os.stat(directory / name)
        bodies[name] = (directory / name).read_bytes()
    return bodies


def resolves(path: Path) -> bool:
    try:
        os.stat(path)
    except FileNotFoundError:
        return False
    return True


def assert_gone_at_once(directory: Path, names: set[str]) -> None:
    assert names, "nothing left the listing: the test changed nothing"
    still = sorted(n for n in names if resolves(directory / n))
    assert not still, f"names that left the listing still resolve: {still[:5]}"


def assert_kernel_agrees(directory: Path, cached: dict[str, bytes]) -> None:
    """Walk the cached names first (no ``ls``), then list: exactly the names still
    listed resolve, and at least one name left."""
    resolved = {n for n in cached if resolves(directory / n)}
    listed = set(result_names(directory))
    assert cached.keys() - listed, "nothing left the listing: the test changed nothing"
    assert resolved == cached.keys() & listed, \
        f"names that left still resolve: {sorted(resolved - listed)[:5]}"


def assert_exact(directory: Path, names: list[str]) -> None:
    for name in names:
        body = (directory / name).read_bytes()
        assert os.stat(directory / name).st_size == len(body), name


def write(mount: Mount, query: str, control: str, value: str) -> None:
    mount.path(query, ".meta", control).write_text(value + "\n")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("control", "value"), [
    ("threshold", "0.6"), ("limit", "5"), ("exclude", "gzip")])
def test_a_meta_write_drops_the_names_that_left(
        mount_factory: Callable[..., Mount], control: str, value: str) -> None:
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    write(mount, RELEVANT, "threshold", "0.3")
    write(mount, RELEVANT, "limit", "50")  # a written limit: no relevance cut
    before = cache_in_kernel(query)
    write(mount, RELEVANT, control, value)
    assert_kernel_agrees(query, before)
    assert_exact(query, result_names(query))


@pytest.mark.timeout(60)
def test_changed_bytes_of_the_same_size_are_read_anew(
        mount_factory: Callable[..., Mount]) -> None:
    """A union term raises some scores: the files keep their names and sizes (the score
    has a fixed width) but their bytes change; the kernel's pages must not be served."""
    mount = mount_factory()
    query = mount.path("gzip")
    query.mkdir()
    write(mount, "gzip", "threshold", "0")
    before = cache_in_kernel(query)
    write(mount, "gzip", "union", RELEVANT)
    changed = 0
    for name in result_names(query):
        body = (query / name).read_bytes()
        score = float(os.getxattr(query / name, "user.kg.score"))  # never cached
        shown = float(re.search(rb"score: ([0-9.]+)", body).group(1))  # type: ignore[union-attr]
        assert abs(shown - score) < 1e-4, f"{name}: stale bytes (score {shown} vs {score})"
        assert os.stat(query / name).st_size == len(body)
        changed += name in before and before[name] != body
    assert changed, "no file changed its bytes: the test proved nothing"


@pytest.mark.timeout(60)
def test_a_new_server_default_drops_the_names_that_left(
        mount_factory: Callable[..., Mount], kg_admin: Any) -> None:
    mount = mount_factory(extra_args=["--poll-interval", "0.5", "--max-age", "2"])
    query = mount.path(RELEVANT)
    query.mkdir()
    before = cache_in_kernel(query)
    with kg_admin.default_set_to(0.8):
        narrower = len(kg_admin.search(RELEVANT, min_similarity=0.8)["results"])
        assert narrower < len(before)
        # no `ls`: only the cached names are walked; they must stop resolving
        wait_until(lambda: sum(resolves(query / n) for n in before) <= narrower,
                   timeout=4, message="names above the old default dropped")
        assert_exact(query, result_names(query))


@pytest.fixture
def zebra_farm(kg_scratch_server: Any, mount_factory: Callable[..., Mount], tmp_path: Path
               ) -> Iterator[tuple[Any, Mount, Path]]:
    server = kg_scratch_server  # not the shared server: its tests ingest a zebra
    mount = mount_factory(server=server,
                          extra_args=["--ingest-delay", "0.3", "--poll-interval", "0.5"],
                          allowed_log=[r"WARNING kg_fuse.fs.queries.ingest"])
    query = mount.path(ZEBRA_QUERY)
    query.mkdir()
    write(mount, ZEBRA_QUERY, "threshold", "0")
    write(mount, ZEBRA_QUERY, "limit", "3")
    source = tmp_path / "zebra.md"
    source.write_text(ZEBRA)
    yield server, mount, source
    with server.client("admin") as http:  # with its documents: the next test has no zebra
        assert http.delete("/ontology/Farm").status_code in (200, 404)


@pytest.mark.timeout(120)
def test_new_server_content_drops_the_names_that_left(zebra_farm: Any) -> None:
    """Another client ingests: the mount sees a new epoch and the kernel forgets."""
    server, mount, source = zebra_farm
    query = mount.path(ZEBRA_QUERY)
    before = cache_in_kernel(query)
    with server.client("admin") as http:
        http.post("/ontology/", json={"name": "Farm", "description": ""})
        response = http.post("/ingest", data={"ontology": "Farm", "filename": "zebra.md",
                                              "auto_approve": "true"},
                             files={"file": ("zebra.md", source.read_bytes())})
        assert response.status_code in (200, 201, 202), response.text
    wait_until(lambda: sum(resolves(query / n) for n in before) < len(before), timeout=60,
               interval=0.2, message="an old name dropped after the new epoch")
    assert "Zebra husbandry.concept.md" in result_names(query)
    assert_exact(query, result_names(query))


@pytest.mark.timeout(120)
def test_an_ingest_through_the_mount_drops_the_names_that_left(zebra_farm: Any) -> None:
    _, mount, source = zebra_farm
    mount.path("ontology", "Farm").mkdir()
    query = mount.path(ZEBRA_QUERY)
    before = cache_in_kernel(query)
    ingest = mount.path("ontology", "Farm", "ingest")
    shutil.copy(source, ingest)
    wait_until(lambda: not os.listdir(ingest), timeout=60, interval=0.2,
               message="the ingest job finishing")
    wait_until(lambda: sum(resolves(query / n) for n in before) < len(before), timeout=2,
               interval=0.05, message="an old name dropped after the ingest")
    assert "Zebra husbandry.concept.md" in result_names(query)


@pytest.mark.timeout(60)
def test_rmdir_and_a_new_query_of_the_same_name(mount_factory: Callable[..., Mount]) -> None:
    mount = mount_factory()
    query = mount.path(RELEVANT)
    query.mkdir()
    write(mount, RELEVANT, "threshold", "0.3")
    write(mount, RELEVANT, "limit", "50")  # a written limit: no relevance cut
    before = cache_in_kernel(query)
    os.rmdir(query)
    assert_gone_at_once(query, set(before))
    query.mkdir()
    write(mount, RELEVANT, "threshold", "0.3")
    write(mount, RELEVANT, "limit", "3")
    assert_kernel_agrees(query, before)
    assert len(result_names(query)) == 3


@pytest.mark.timeout(60)
def test_the_kernel_caches_names_until_max_age(mount_factory: Callable[..., Mount],
                                               kg_admin: Any) -> None:
    """Names are cached for what is left of --max-age: once it passed, a bare ``stat``
    (no ``ls``) fetches the listing again."""
    mount = mount_factory(extra_args=["--max-age", "3"])
    query = mount.path(RELEVANT)
    query.mkdir()
    names = result_names(query)
    searches = len(kg_admin.search_log(RELEVANT))
    started = time.monotonic()
    for _ in range(5):
        for name in names:
            os.stat(query / name)
    if time.monotonic() - started < 2.5:
        assert len(kg_admin.search_log(RELEVANT)) == searches
    time.sleep(3.2)
    os.stat(query / names[0])
    assert len(kg_admin.search_log(RELEVANT)) > searches, "expired names were not refetched"


# -- listings on a busy server ------------------------------------------------------------

MISSING = "could not be fetched"


@pytest.mark.timeout(120)
def test_a_large_listing_on_a_busy_server_is_complete(proxied: Callable[..., Mount],
                                                      proxy: Any) -> None:
    """Every concept detail takes 0.25 s (a busy, healthy server) and the deadline per
    request is 2 s: 150 details take ~5 s at 8 in flight, over twice one deadline, and
    still every file has its evidence (the batch's deadline scales with its size). The
    per-request margin (1.75 s) leaves room for a loaded machine's own delays."""
    mount = proxied(timeout=2.0)
    query = mount.path(RELEVANT)
    query.mkdir()
    write(mount, RELEVANT, "threshold", "0")
    write(mount, RELEVANT, "limit", "150")
    proxy.set_mode("slow", delay=0.25, paths=["/query/concept"])
    names = result_names(query)
    assert len(names) == 150
    incomplete = [n for n in names if MISSING in (query / n).read_text()]
    assert not incomplete, f"{len(incomplete)} files rendered without details"


@pytest.mark.timeout(120)
def test_a_stalled_detail_batch_ends_at_the_first_deadline(
        proxied: Callable[..., Mount], proxy: Any) -> None:
    mount = proxied(timeout=1.0, allowed_log=[r"concept details timed out"])
    query = mount.path(RELEVANT)
    query.mkdir()
    write(mount, RELEVANT, "threshold", "0")
    write(mount, RELEVANT, "limit", "150")
    proxy.set_mode("stall", paths=["/query/concept"])
    started = time.monotonic()
    names = result_names(query)
    elapsed = time.monotonic() - started
    assert len(names) == 150
    assert elapsed < 3.0, f"a stalled server held the listing for {elapsed:.1f}s"
    assert MISSING in (query / names[-1]).read_text()
