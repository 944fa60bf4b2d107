"""Kernel-free: the mount works with the platform as it is (issue 39). The real app
answers as the platform does where the platform departs from the contract
(``tests.helpers.core.AsThePlatform``: a scoped search that lists nothing, hints computed
over every ontology, no default in the epoch, the admin endpoint refused), and what a user
sees is the same as against our own server. The live tier checks the same against the
platform itself (tests/platform); the replay tier against its recorded answers."""

from __future__ import annotations

import pytest

from tests.helpers.core import AsThePlatform, Core

COMPRESSION = "Data Compression and Archiving"
FORMATS = "File Formats"


def results(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.endswith(".concept.md"))


async def status(core: Core, query: str) -> str:
    return (await core.fs.read(f"{query}/.meta/status")).decode()


async def as_the_platform(core: Core) -> None:
    """From now on the app answers as the platform does; the client learns it anew."""
    core.client._http._transport = AsThePlatform(core.server.transport())  # noqa: SLF001
    core.client.scopes = None


async def test_a_scoped_query_lists_what_our_server_lists_in_that_ontology(core: Core
                                                                          ) -> None:
    query = f"ontology/{COMPRESSION}/read a file"
    await core.fs.mkdir(query)
    ours = results(await core.fs.listdir(query))
    await core.fs.rmdir(query)

    await as_the_platform(core)
    await core.fs.mkdir(query)
    theirs = results(await core.fs.listdir(query))
    assert ours and theirs == ours
    assert core.client.scopes is False  # learned from the platform's first scoped answer


async def test_a_link_restricts_a_query_to_its_ontology_instead_of_emptying_it(core: Core
                                                                               ) -> None:
    await core.fs.mkdir("parse a document")
    everything = results(await core.fs.listdir("parse a document"))
    await core.fs.symlink(f"parse a document/{FORMATS}", f"../ontology/{FORMATS}")
    ours = results(await core.fs.listdir("parse a document"))
    await core.fs.rmdir("parse a document")

    await as_the_platform(core)
    await core.fs.mkdir("parse a document")
    await core.fs.symlink(f"parse a document/{FORMATS}", f"../ontology/{FORMATS}")
    theirs = results(await core.fs.listdir("parse a document"))
    assert ours and theirs == ours
    assert set(theirs) != set(everything)  # the link did restrict it


@pytest.mark.parametrize("platform", [False, True], ids=["our server", "the platform"])
async def test_an_empty_scoped_listing_blames_the_scope_not_the_threshold(
        core: Core, platform: bool) -> None:
    """gzip's concepts are all in the compression ontology: scoped to File Formats,
    'gzip compress' has nothing at 0.5, though it matches there strongly."""
    if platform:
        await as_the_platform(core)
    query = f"ontology/{FORMATS}/gzip compress"
    await core.fs.mkdir(query)
    await core.fs.write(f"{query}/.meta/threshold", b"0.5\n")
    assert results(await core.fs.listdir(query)) == []
    text = await status(core, query)
    lines = dict(line.split(": ", 1) for line in text.splitlines())
    assert lines["cut"].startswith("nothing listed: ") and (
        "'gzip compress' reach the threshold, none of them in File Formats") in lines["cut"]
    assert lines["filtered by"].startswith("the scope: ")
    assert "no concept reached" not in text and "no concept matches" not in text
    assert "gzip" not in lines.get("best near miss", "") + lines.get("near misses", "")


@pytest.mark.fresh_server
async def test_an_ordinary_users_mount_follows_a_new_default_within_one_poll(core: Core
                                                                            ) -> None:
    """The platform's epoch carries no default and its admin endpoint refuses an ordinary
    user: a poll asks a one-result search instead, while a listing is held."""
    await as_the_platform(core)
    await core.fs.mkdir("compress data")
    assert results(await core.fs.listdir("compress data"))
    await core.service.server.poll()
    before = (await core.fs.read("compress data/.meta/threshold")).decode()
    async with core.server.http("admin") as http:
        (await http.put("/admin/config/search-threshold", json={"threshold": 0.47})
         ).raise_for_status()
    assert "0.47" not in before
    await core.service.server.poll()  # one poll
    after = (await core.fs.read("compress data/.meta/threshold")).decode()
    assert "# Server default: 0.47\n" in after, after


async def test_the_first_listing_below_the_default_is_cut_as_every_later_one(core: Core
                                                                             ) -> None:
    """The platform's epoch carries no default: a mount whose first act is to list a
    query made with a threshold below the default (``mkdir "read a file@0.05"``) learns the
    default first, so that listing gets the size of
    the band its threshold falls in (25 below the default), not the standard 12 it would
    get while the default is unknown, and lists what it lists once the default is known."""
    await as_the_platform(core)
    await core.fs.mkdir("read a file@0.05")
    first = results(await core.fs.listdir("read a file@0.05"))
    await core.fs.rmdir("read a file@0.05")
    await core.service.server.poll()  # the default known for sure now
    await core.fs.mkdir("read a file")
    await core.fs.write("read a file/.meta/threshold", b"0.05\n")
    later = results(await core.fs.listdir("read a file"))
    assert len(later) > 12  # the band below the default lists more than the standard size
    assert first == later
