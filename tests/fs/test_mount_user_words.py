"""Mounted: queries in the user's words, not the documents' (issue: word forms, WordNet's
meanings, noise kept out by evidence), at the inherited default of a server that
calibrated itself."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers.server import KGServer

pytestmark = pytest.mark.mount

SOURDOUGH = """# Sourdough

## Feeding the starter

Feed the starter with flour and water the night before baking, and keep it warm.

## Baking bread

Baking bread needs a hot oven, and the crust is done when it is deep brown.
"""


def results(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))


def status(directory: Path) -> dict[str, str]:
    text = (directory / ".meta" / "status").read_text()
    return dict(line.split(": ", 1) for line in text.splitlines())



def test_a_dish_the_handbook_never_names_lists_its_section(mount_factory,
                                                          kitchen_server: KGServer) -> None:
    mount = mount_factory(server=kitchen_server)
    query = mount.path("spaghetti")
    query.mkdir()
    assert "Cooking pasta.concept.md" in results(query)
    explained = status(query)
    assert explained["effective threshold"].endswith("(server default)")
    assert "spaghetti -> pasta" in explained["words read as"]
    assert "words the documents never use" not in explained
    omelet = mount.path("omelet")
    omelet.mkdir()
    assert "Making an omelette.concept.md" in results(omelet)


def test_gibberish_lists_nothing_and_says_why(mount_factory,
                                             kitchen_server: KGServer) -> None:
    mount = mount_factory(server=kitchen_server)
    for noise in ("asdfgh qwerty zxcvb", "-ss", "xxx zzz", "foo_bar_baz"):
        query = mount.path(noise)
        query.mkdir()
        assert results(query) == [], noise
        explained = status(query)
        assert explained["results"] == "0"
        assert "suggested threshold" not in explained, noise  # nothing near: noise
    assert status(mount.path("asdfgh qwerty zxcvb"))["words the documents never use"] \
        == "asdfgh, qwerty, zxcvb"
    chant = mount.path("pasta pasta pasta")  # "pasta" alone lists Cooking pasta
    chant.mkdir()
    assert results(chant) == []
    explained = status(chant)
    assert explained["words said over and over"] == "pasta"
    assert "write each word once" in explained["hint"]


def test_an_empty_directory_names_its_near_misses_and_a_way_forward(
        mount_factory, kitchen_server: KGServer) -> None:
    mount = mount_factory(server=kitchen_server)
    query = mount.path("pasta")
    query.mkdir()
    (query / ".meta" / "threshold").write_text("0.95\n")  # nothing reaches it
    assert results(query) == []
    explained = status(query)
    near = explained["near misses"]
    assert near.startswith("Cooking pasta (")
    best = float(near.split("(", 1)[1].split(")", 1)[0])
    suggested = float(explained["suggested threshold"])
    assert best - 0.01 < suggested <= best  # just below the best, not the noise floor
    assert f"write {explained['suggested threshold']} to .meta/threshold" in explained["hint"]
    (query / ".meta" / "threshold").write_text(f"{suggested}\n")
    listed = results(query)
    assert "Cooking pasta.concept.md" in listed and len(listed) < 10


def test_a_note_found_in_other_forms_of_its_words(mount_factory, kg_scratch_server,
                                                 tmp_path: Path) -> None:
    mount = mount_factory(server=kg_scratch_server,
                          extra_args=["--ingest-delay", "0.5", "--poll-interval", "1"])
    ontology = mount.path("ontology", "Sourdough")
    ontology.mkdir()
    try:
        note = tmp_path / "sourdough.md"
        note.write_text(SOURDOUGH)
        shutil.copy(note, ontology / "ingest")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and os.listdir(ontology / "documents") == []:
            time.sleep(0.2)
        assert os.listdir(ontology / "documents") == ["sourdough.md"]
        query = mount.path("bake a loaf")
        query.mkdir()
        assert "Baking bread.concept.md" in results(query)
        explained = status(query)
        assert "bake -> baking" in explained["words read as"]
        assert "loaf -> bread" in explained["words read as"]
    finally:  # with its document: the next module finds the store as it was
        with kg_scratch_server.client("admin") as admin:
            assert admin.delete("/ontology/Sourdough").status_code == 200
