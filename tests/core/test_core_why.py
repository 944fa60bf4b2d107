"""Kernel-free: every listed result says, on its first screen, why it is listed (issue
42), whether it matched by its words, through a reading of a word the documents never
use, or by meaning alone; ``.meta/status`` sums it up; ``user.kg.why`` says the same.
Against the platform (``AsThePlatform``: no ``why`` in its answers) a file says what the
mount can know (the words it finds in the text, the score), and says that it is so."""

from __future__ import annotations

import re

import pytest

from tests.helpers.core import AsThePlatform, Core

FIRST_SCREEN = 24  # lines: a terminal's first screen of `cat` or `less`


def results(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".concept.md")]


async def listed(core: Core, query: str) -> dict[str, str]:
    """Each listed file's text, by name."""
    await core.fs.mkdir(query)
    return {name: (await core.fs.read(f"{query}/{name}")).decode()
            for name in results(await core.fs.listdir(query))}


def why_part(text: str) -> list[str]:
    """The file's "Why" part: its lines, from its heading to the blank line after it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Why"))
    assert start < FIRST_SCREEN, "the Why part is not on the first screen"
    end = lines.index("", start)
    assert end <= FIRST_SCREEN, "the Why part does not end on the first screen"
    return lines[start:end]


def item(why: list[str], key: str) -> str | None:
    return next((line[len(f"- {key}: "):] for line in why if line.startswith(f"- {key}: ")),
                None)


def score_of(text: str) -> float:
    return float(re.search(r"^score: ([0-9.]+)$", text, re.M)[1])  # type: ignore[index]


async def status_lines(core: Core, query: str) -> dict[str, str]:
    text = (await core.fs.read(f"{query}/.meta/status")).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


async def as_the_platform(core: Core) -> None:
    core.client._http._transport = AsThePlatform(core.server.transport())  # noqa: SLF001
    core.client.scopes = None


async def test_a_result_found_by_its_words_names_them_where_they_are(core: Core) -> None:
    files = await listed(core, "compress data with gzip")
    text = files["gzip.compress.concept.md"]
    why = why_part(text)
    assert item(why, "words") == ("compress in the label, signature, description and "
                                  "evidence; data in the signature, description and "
                                  "evidence; gzip in the label")
    # the score in the server's parts, which add up to the score the file shows
    parts = re.match(r"([0-9.]+) = meaning ([0-9.]+) \+ words ([0-9.]+) \((.*)\)",
                     item(why, "score") or "")
    assert parts, why
    assert float(parts[1]) == score_of(text)
    assert float(parts[2]) + float(parts[3]) == pytest.approx(score_of(text), abs=2e-4)
    assert "compress" in parts[4] and "gzip" in parts[4]
    assert item(why, "threshold") == (f"0.16 (the server default), passed by "
                                      f"{score_of(text) - 0.16:.4f}; the best listed score")
    for name, other in files.items():  # every listed file says why
        assert item(why_part(other), "score"), name


async def test_a_result_found_through_a_reading_names_the_reading(core: Core) -> None:
    """The documents never say "zipper"; WordNet reads it as their "zip"."""
    files = await listed(core, "zipper")
    assert len(files) >= 3
    for name, text in files.items():
        why = why_part(text)
        assert (item(why, "read as") or "").startswith(
            "zipper as zip (WordNet: a synonym) in the "), (name, why)
        assert "(zipper 0." in (item(why, "score") or ""), why
    lines = await status_lines(core, "zipper")
    assert lines["readings used"] == (f"zipper as zip (WordNet: a synonym) in {len(files)} "
                                      f"of {len(files)}")
    assert lines["by meaning alone"] == f"0 of {len(files)}"


async def test_a_result_found_by_meaning_alone_says_so(core: Core) -> None:
    """Neither "spreadsheet" nor "rows" is in csv.excel's text: the model placed it."""
    files = await listed(core, "spreadsheet rows")
    why = why_part(files["csv.excel.concept.md"])
    assert item(why, "by meaning alone") == "the query's words added nothing to its score"
    assert item(why, "not in its text") == "spreadsheet, rows"
    assert re.fullmatch(r"0\.\d{4} = meaning 0\.\d{4} .*\+ words 0\.0000",
                        item(why, "score") or "")
    alone = sum(item(why_part(t), "by meaning alone") is not None for t in files.values())
    assert 0 < alone < len(files)  # csv.reader has "rows" in its evidence
    lines = await status_lines(core, "spreadsheet rows")
    assert lines["by meaning alone"] == (f"{alone} of {len(files)} (the query's words "
                                         "added nothing to their scores)")
    assert lines["words in no result"] == "spreadsheet"
    assert lines["words found"] == f"rows in {len(files) - alone} of {len(files)}"


async def test_the_extended_attribute_says_what_the_file_says(core: Core) -> None:
    query = "compress data with gzip"
    files = await listed(core, query)
    for name, text in files.items():
        path = f"{query}/{name}"
        assert b"user.kg.why" in await core.fs.listxattr(path)
        attribute = (await core.fs.getxattr(path, b"user.kg.why")).decode()
        assert attribute.splitlines() == why_part(text)
        assert (await core.fs.stat(path)).st_size == len(text.encode())  # sizes exact


@pytest.mark.parametrize("query", ["compress data with gzip", "zipper"])
async def test_against_the_platform_a_file_says_what_the_mount_can_know(
        core: Core, query: str) -> None:
    """The platform says no why: the words the mount finds in the text, and the score,
    each said to be so; never parts the platform did not give."""
    await as_the_platform(core)
    files = await listed(core, query)
    assert files
    for name, text in files.items():
        why = why_part(text)
        assert why[0] == ("Why it is listed (the server does not say; the mount found the "
                          "query's words in this file's text):"), name
        assert item(why, "score") == (f"{score_of(text):.4f} (the server's; it does not "
                                      "say what made it)")
        assert "meaning 0." not in text and "read as" not in text
    lines = await status_lines(core, query)
    assert lines["why"].startswith("found by the mount in the results' text")
    if query == "zipper":  # its reading is the server's own: the platform's text lacks it
        assert lines["words in no result"] == "zipper"
        assert lines["by meaning alone"].startswith(f"{len(files)} of {len(files)} (none")
    else:
        gzip = files["gzip.compress.concept.md"]
        assert item(why_part(gzip), "words") == (
            "compress in the label, signature, description and evidence; data in the "
            "signature, description and evidence; gzip in the label")
