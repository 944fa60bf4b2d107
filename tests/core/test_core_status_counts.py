"""What ``.meta/status`` counts, checked against the listing it describes: each level of a
nested query, a linked level, union and exclude terms (kernel-free tier, real app).

Every query here has an explicit threshold and a limit past the corpus, so its listing
holds every concept that reaches all its levels: the counts can be compared with it."""

from __future__ import annotations

import re

from tests.helpers.core import Core

COMPRESSION = "Data Compression and Archiving"
PARENT = "read data from files"
CHILD = f"{PARENT}/compressed archives"


async def status(core: Core, query: str) -> dict[str, str]:
    text = (await core.fs.read(f"{query}/.meta/status")).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


async def listed(core: Core, query: str) -> int:
    return sum(n.endswith(".concept.md") for n in await core.fs.listdir(query))


async def list_everything(core: Core, query: str, threshold: float | None = None) -> None:
    """An explicit threshold (the default unless given) and no limit in the way."""
    value = core.server.graph.default_threshold() if threshold is None else threshold
    await core.fs.write(f"{query}/.meta/limit", b"1000\n")
    await core.fs.write(f"{query}/.meta/threshold", f"{value}\n".encode())


def number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found is not None, (pattern, text)
    return 0 if found[1] == "none" else int(found[1])


async def check_enclosing_level(core: Core) -> None:
    """The child's listing is what ``filtered by`` says reaches the enclosing level, and
    level 1 says how many of its matches do not."""
    count = await listed(core, CHILD)
    lines = await status(core, CHILD)
    own = number(r"; (\d+) matches$", lines["level 2"])
    reach = number(r": (\d+|none) of this query's \d+ matches reach it$",
                   lines["filtered by"])
    missing = number(r", (\d+) of this query's matches not among them$", lines["level 1"])
    assert 0 < count < own
    assert (reach, missing) == (count, own - count), lines


async def test_a_nested_query_s_status_counts_what_reaches_the_enclosing_level(
        core: Core) -> None:
    await core.fs.mkdir(PARENT)
    await core.fs.mkdir(CHILD)
    await core.fs.write(f"{PARENT}/.meta/threshold", b"0.4\n")
    await list_everything(core, CHILD)
    await check_enclosing_level(core)


async def test_a_linked_enclosing_level_s_status_counts_what_reaches_it(core: Core) -> None:
    await core.fs.mkdir(PARENT)
    await core.fs.mkdir(CHILD)
    await core.fs.symlink(f"{PARENT}/compression", f"../ontology/{COMPRESSION}")
    await list_everything(core, CHILD)
    await check_enclosing_level(core)


async def test_union_and_exclude_counts_add_up_to_the_listing(core: Core) -> None:
    query = "compress data with gzip"
    await core.fs.mkdir(query)
    await list_everything(core, query, 0.4)
    alone = await listed(core, query)
    assert number(r"; (\d+) matches$", (await status(core, query))["level 1"]) == alone
    await core.fs.write(f"{query}/.meta/union", b"read and write CSV files\n")
    lines = await status(core, query)
    added = number(r", (\d+) added$", lines["union 'read and write CSV files'"])
    assert added > 0 and await listed(core, query) == alone + added
    await core.fs.write(f"{query}/.meta/exclude", b"lzma compression\n")
    lines = await status(core, query)
    removed = number(r", (\d+) removed$", lines["exclude 'lzma compression'"])
    assert removed > 0 and await listed(core, query) == alone + added - removed
