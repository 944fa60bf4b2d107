"""Kernel-free: saved queries as directories, results as files (moved from the mounted
basics, where the kernel added nothing to what these check)."""

from __future__ import annotations

import errno
import os
import tomllib

import pyfuse3
import pytest
import yaml

from kg_fuse.client.api import KgApiClient
from kg_fuse.fs.mount import assemble, first_look
from kg_fuse.fs.queries.servers import ServerStores
from kg_fuse.listing.execute import execute
from kg_fuse.listing.plan import Level, QueryPlan
from tests.helpers.core import API_URL, Core, SearchAnswersRewritten, mount_options
from tests.helpers.driver import CTX, FsDriver

RELEVANT = "compress data with gzip"
GIBBERISH = "asdfgh qwerty zxcvb"
META_FILES = ["exclude", "limit", "query.toml", "status", "threshold", "union"]


def results(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.endswith(".concept.md"))


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    head, _, _ = text[4:].partition("\n---\n")
    return yaml.safe_load(head)


async def test_mkdir_lists_matching_concepts_and_cat_shows_them(core: Core) -> None:
    fs = core.fs
    await fs.mkdir(RELEVANT)
    assert await fs.listdir() == ["ontology", RELEVANT]
    names = results(await fs.listdir(RELEVANT))
    assert "gzip.compress.concept.md" in names, names
    meta = front_matter((await fs.read(f"{RELEVANT}/gzip.compress.concept.md")).decode())
    assert meta["label"] == "gzip.compress"
    assert meta["id"] and 0 < meta["score"] <= 1
    assert isinstance(meta["ontologies"], list) and meta["ontologies"]
    body = (await fs.read(f"{RELEVANT}/gzip.compress.concept.md")).decode()
    assert "## Evidence" in body and "## Relationships" in body


async def test_sizes_in_listing_stat_and_read_agree(core: Core) -> None:
    """READDIRPLUS attributes must equal getattr's, and st_size the bytes read (the
    kernel cuts reads at st_size)."""
    await core.fs.mkdir(RELEVANT)
    listed = [e for e in await core.fs.readdir(RELEVANT) if e.name.endswith(".concept.md")]
    assert listed
    for entry in listed:
        path = f"{RELEVANT}/{entry.name}"
        stat = await core.fs.stat(path)
        data = await core.fs.read(path)
        assert entry.attributes.st_ino == stat.st_ino
        assert entry.attributes.st_size == stat.st_size == len(data), entry.name
        assert entry.attributes.st_mtime_ns == stat.st_mtime_ns


async def test_listing_offsets_resume_where_the_kernel_stopped(core: Core) -> None:
    """readdir may be called again from any offset it returned: no entry skipped or
    repeated."""
    await core.fs.mkdir(RELEVANT)
    whole = await core.fs.readdir(RELEVANT)
    fh = await core.ops.opendir(await core.fs.inode(RELEVANT), CTX)
    try:
        seen = []
        offset = 0
        while True:
            token: list = []
            await core.ops.readdir(fh, offset, token)
            if not token:
                break
            seen.append(token[0].name)  # take one entry, as if the kernel's buffer filled
            offset = token[0].next_id
    finally:
        await core.ops.releasedir(fh)
    assert seen == [e.name for e in whole]


async def test_result_files_are_read_only_and_rm_changes_nothing(core: Core) -> None:
    await core.fs.mkdir(RELEVANT)
    name = results(await core.fs.listdir(RELEVANT))[0]
    with pytest.raises(pyfuse3.FUSEError) as refused:
        await core.fs.open(f"{RELEVANT}/{name}", os.O_WRONLY)
    assert refused.value.errno == errno.EACCES
    await core.fs.unlink(f"{RELEVANT}/{name}")  # accepted: rm -r QUERY stays quiet
    assert name in await core.fs.listdir(RELEVANT)


async def test_gibberish_lists_nothing_at_the_calibrated_default(core: Core) -> None:
    await core.fs.mkdir(GIBBERISH)
    assert results(await core.fs.listdir(GIBBERISH)) == []
    assert sorted(await core.fs.listdir(f"{GIBBERISH}/.meta")) == META_FILES


# Regression test (issue 34): nonsense at threshold 0 listed 50 files, all scoring 0.0000.
async def test_a_score_of_0_is_no_match_even_at_threshold_0(core: Core) -> None:
    nonsense = f"{GIBBERISH}@0"
    await core.fs.mkdir(nonsense)
    assert results(await core.fs.listdir(nonsense)) == []
    await core.fs.mkdir(RELEVANT)
    await core.fs.write(f"{RELEVANT}/.meta/threshold", b"0\n")
    await core.fs.write(f"{RELEVANT}/.meta/limit", b"50\n")  # every match above it
    names = results(await core.fs.listdir(RELEVANT))
    assert len(names) == 50  # the limit: a real query's words reach many concepts
    for name in names:
        text = (await core.fs.read(f"{RELEVANT}/{name}")).decode()
        assert front_matter(text)["score"] > 0


def zero_tail(body: dict) -> dict:
    """A server that lists concepts scoring 0 at threshold 0 (as the embedded one did):
    every result after the first three of a search scores 0."""
    for result in body["results"][3:]:
        result["score"] = 0.0
    return body


async def test_the_mount_lists_no_concept_a_server_scores_0(core: Core) -> None:
    zeros = KgApiClient(API_URL, core.server.credentials_of("user"), timeout=60,
                        transport=SearchAnswersRewritten(core.server.transport(), zero_tail))
    try:
        outcome = await execute(zeros, QueryPlan((Level(RELEVANT, 0.0),), 50))
        assert len(outcome.hits) == 3 and all(hit.score > 0 for hit in outcome.hits)
    finally:
        await zeros.aclose()


async def test_rmdir_removes_the_query(core: Core) -> None:
    await core.fs.mkdir("zlib checksums")
    await core.fs.rmdir("zlib checksums")
    assert "zlib checksums" not in await core.fs.listdir()
    with pytest.raises(pyfuse3.FUSEError) as gone:
        await core.fs.lookup("zlib checksums")
    assert gone.value.errno == errno.ENOENT
    assert core.service.find(("zlib checksums",)) is None


async def test_mkdir_twice_is_eexist(core: Core) -> None:
    await core.fs.mkdir("tar archives")
    with pytest.raises(pyfuse3.FUSEError) as twice:
        await core.fs.mkdir("tar archives")
    assert twice.value.errno == errno.EEXIST


@pytest.mark.parametrize(
    "name", [b"\xff\xfe", b".hidden", b"query@1.5", b"@0.5", b"tab\there"]
)
async def test_bad_names_are_refused_with_einval(core: Core, name: bytes) -> None:
    with pytest.raises(pyfuse3.FUSEError) as refused:  # an errno, never an exception
        await core.ops.mkdir(pyfuse3.ROOT_INODE, name, 0o755, CTX)
    assert refused.value.errno == errno.EINVAL
    assert await core.fs.listdir() == ["ontology"]
    await core.fs.mkdir("still alive")
    assert "still alive" in await core.fs.listdir()


async def test_lookup_of_undecodable_or_overlong_name(core: Core) -> None:
    with pytest.raises(pyfuse3.FUSEError) as undecodable:
        await core.ops.lookup(pyfuse3.ROOT_INODE, b"\xff", CTX)
    assert undecodable.value.errno == errno.ENOENT
    with pytest.raises(pyfuse3.FUSEError) as overlong:
        await core.ops.lookup(pyfuse3.ROOT_INODE, b"x" * 300, CTX)
    assert overlong.value.errno == errno.ENAMETOOLONG
    assert await core.fs.listdir() == ["ontology"]


async def test_queries_and_overrides_survive_a_remount(core: Core) -> None:
    """What a mount saves at unmount, the next mount over the same state serves."""
    await core.fs.mkdir("json parsing")
    await core.fs.mkdir("bz2 files@0.7")
    await core.fs.write("json parsing/.meta/threshold", b"0.55\n")
    await core.service.save_if_dirty()  # what unmounting does
    stores = ServerStores(core.state_dir, API_URL)
    again = FsDriver(assemble(mount_options(), core.client, stores,
                              await first_look(core.client, stores, 5.0)))
    assert sorted(await again.listdir()) == ["bz2 files@0.7", "json parsing", "ontology"]
    threshold = (await again.read("json parsing/.meta/threshold")).decode()
    assert threshold.splitlines()[-1] == "0.55"
    assert 'query = "bz2 files"' in (await again.read("bz2 files@0.7/.meta/query.toml")
                                     ).decode()


async def test_the_creation_auto_adjust_adopts_the_status_s_suggestion(core: Core) -> None:
    """``NAME@0.97`` that finds nothing is lowered to what ``.meta/status`` suggests at
    0.97 (just below the best near miss), not to the contract's loose suggestion, which
    lists everything down to the noise floor."""
    text = "gzip compression"
    await core.fs.mkdir(text)
    await core.fs.write(f"{text}/.meta/threshold", b"0.97\n")  # written: never adjusted
    assert results(await core.fs.listdir(text)) == []
    status = (await core.fs.read(f"{text}/.meta/status")).decode()
    suggested = float(status.split("suggested threshold: ")[1].split()[0])
    best = status.split("near misses: ")[1].split(" (")[0]

    tight = f"{text}@0.97"
    await core.fs.mkdir(tight)
    settings = tomllib.loads((await core.fs.read(f"{tight}/.meta/query.toml")).decode())
    assert settings["threshold"] == suggested
    assert settings["auto_adjustment"]["from"] == 0.97
    assert settings["auto_adjustment"]["to"] == suggested
    assert suggested >= settings["auto_adjustment"]["server_default"]
    listed = results(await core.fs.listdir(tight))
    assert f"{best}.concept.md" in listed
    assert len(listed) < 5, listed  # the best near miss and those close to it


async def test_a_renamed_query_keeps_its_inodes_and_the_kernel_forgets_names_that_left(
        core: Core) -> None:
    """``mv``: the kernel moved the directory's dentry, so its inode (and the nested
    query's, and ``.meta``'s) answers to the new name; results of the old text that the
    new one does not list are invalidated."""
    await core.fs.mkdir(RELEVANT)
    await core.fs.mkdir(f"{RELEVANT}/levels")
    before = results(await core.fs.listdir(RELEVANT))
    inodes = [await core.fs.inode(p) for p in (RELEVANT, f"{RELEVANT}/levels",
                                               f"{RELEVANT}/.meta")]
    core.kernel.clear()
    await core.fs.rename(RELEVANT, "sort a list")
    await core.ops.kernel.flush()
    told = {name.decode() for parent, name in core.kernel.names if parent == inodes[0]}
    after = results(await core.fs.listdir("sort a list"))
    assert set(before) - set(after) <= told
    assert [core.ops.inodes.get(i).owner for i in inodes] == [
        "sort a list", "sort a list/levels", "sort a list"]
    assert await core.fs.listdir() == ["ontology", "sort a list"]
    with pytest.raises(pyfuse3.FUSEError) as taken:
        await core.fs.rename("sort a list/levels", "sort a list/.meta")
    assert taken.value.errno == errno.EEXIST  # a name the tree keeps, as mkdir says


async def test_a_renamed_query_keeps_its_scratch_files_and_control_mtimes(core: Core) -> None:
    """An editor with a file of ``.meta`` open while the query is renamed: its scratch
    file and the control's mtime (vim compares it before saving) move along."""
    await core.fs.mkdir(RELEVANT)
    await core.fs.write(f"{RELEVANT}/.meta/threshold", b"0.6\n")
    await core.fs.create(f"{RELEVANT}/.meta/.threshold.swp", b"swap")
    mtime = (await core.fs.stat(f"{RELEVANT}/.meta/threshold")).st_mtime_ns
    await core.fs.rename(RELEVANT, "gzip data")
    assert await core.fs.read("gzip data/.meta/.threshold.swp") == b"swap"
    assert (await core.fs.stat("gzip data/.meta/threshold")).st_mtime_ns == mtime
