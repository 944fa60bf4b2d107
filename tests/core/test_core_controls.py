"""Kernel-free: the ``.meta`` control files: what they show, what a write commits, what a
refused write leaves (moved from the mounted threshold and tree tests; the shell's own
write styles, ``sed -i`` and vim stay mounted)."""

from __future__ import annotations

import errno
import os
import tomllib

import pyfuse3
import pytest

from tests.helpers.core import Core

QUERY = "compress data with gzip"
THRESHOLD = f"{QUERY}/.meta/threshold"


def results(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.endswith(".concept.md"))


async def value_line(core: Core, path: str = THRESHOLD) -> str:
    return (await core.fs.read(path)).decode().splitlines()[-1]


async def settings(core: Core, query: str = QUERY) -> dict:
    return tomllib.loads((await core.fs.read(f"{query}/.meta/query.toml")).decode())


@pytest.fixture
async def query(core: Core) -> Core:
    await core.fs.mkdir(QUERY)
    return core


async def test_new_query_inherits_and_shows_the_server_default(query: Core) -> None:
    text = (await query.fs.read(THRESHOLD)).decode()
    assert text.splitlines()[-1] == "inherit"
    default = query.server.graph.default_threshold()
    assert f"Server default: {default:g}" in text
    assert all(line.startswith("#") for line in text.splitlines()[:-1])
    toml = await settings(query)
    assert toml["threshold"] == "inherit"
    assert toml["server_default_last_seen"] == pytest.approx(default)


@pytest.mark.parametrize("word", [b"inherit", b"default", b"INHERIT", b""])
async def test_inherit_words_and_empty_go_back_to_inheriting(query: Core, word: bytes) -> None:
    await query.fs.write(THRESHOLD, b"0.7\n")
    assert (await settings(query))["threshold"] == 0.7
    await query.fs.write(THRESHOLD, word)
    assert await value_line(query) == "inherit"
    assert (await settings(query))["threshold"] == "inherit"


async def test_truncate_on_the_path_goes_back_to_inheriting(query: Core) -> None:
    await query.fs.write(THRESHOLD, b"0.7\n")
    attributes = await query.fs.truncate(THRESHOLD)
    assert await value_line(query) == "inherit"
    assert attributes.st_size == len(await query.fs.read(THRESHOLD))


async def test_saving_unchanged_keeps_inheriting_and_the_mtime(query: Core) -> None:
    before = await query.fs.stat(THRESHOLD)
    await query.fs.write(THRESHOLD, await query.fs.read(THRESHOLD))
    assert await value_line(query) == "inherit"
    assert (await settings(query))["threshold"] == "inherit"
    assert (await query.fs.stat(THRESHOLD)).st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize(
    "bad", [b"banana", b"nan", b"inf", b"-0.1", b"1.5", b"0.5 0.6", b"0.5\n0.6\n", b"0x1",
            b"1e5"]
)
async def test_invalid_writes_fail_with_einval_and_change_nothing(query: Core, bad: bytes
                                                                  ) -> None:
    await query.fs.write(THRESHOLD, b"0.66\n")
    with pytest.raises(pyfuse3.FUSEError) as refused:
        await query.fs.write(THRESHOLD, bad)
    assert refused.value.errno == errno.EINVAL
    assert await value_line(query) == "0.66"
    assert (await settings(query))["threshold"] == 0.66


async def test_five_thousand_digits_is_einval_not_eio(query: Core) -> None:
    for name in ("limit", "threshold"):
        with pytest.raises(pyfuse3.FUSEError) as refused:
            await query.fs.write(f"{QUERY}/.meta/{name}", b"9" * 5000)
        assert refused.value.errno == errno.EINVAL, name


@pytest.mark.parametrize("name", ["query.toml", "status"])
async def test_generated_meta_files_are_read_only(query: Core, name: str) -> None:
    with pytest.raises(pyfuse3.FUSEError) as refused:
        await query.fs.open(f"{QUERY}/.meta/{name}", os.O_WRONLY)
    assert refused.value.errno == errno.EACCES


async def test_an_editor_rename_over_the_control_commits_it(query: Core) -> None:
    """``sed -i``: a scratch file in ``.meta`` renamed over the control file."""
    await query.fs.create(f"{QUERY}/.meta/sedAbC12", b"0.72\n")
    await query.fs.rename(f"{QUERY}/.meta/sedAbC12", THRESHOLD)
    assert await value_line(query) == "0.72"
    assert "sedAbC12" not in await query.fs.listdir(f"{QUERY}/.meta")
    await query.fs.create(f"{QUERY}/.meta/sedXyZ34", b"banana\n")
    with pytest.raises(pyfuse3.FUSEError) as refused:
        await query.fs.rename(f"{QUERY}/.meta/sedXyZ34", THRESHOLD)
    assert refused.value.errno == errno.EINVAL
    assert await value_line(query) == "0.72"


async def test_higher_threshold_lists_fewer_and_the_kernel_forgets_dropped_names(
        query: Core) -> None:
    before = results(await query.fs.listdir(QUERY))
    assert before
    directory = await query.fs.inode(QUERY)
    query.kernel.clear()
    await query.fs.write(THRESHOLD, b"0.9\n")
    after = results(await query.fs.listdir(QUERY))
    assert len(after) < len(before) and set(after) <= set(before)
    told = {name.decode() for parent, name in query.kernel.names if parent == directory}
    assert set(before) - set(after) <= told  # the kernel stops resolving them
    for gone in set(before) - set(after):
        with pytest.raises(pyfuse3.FUSEError) as missing:
            await query.fs.lookup(f"{QUERY}/{gone}")
        assert missing.value.errno == errno.ENOENT
    await query.fs.write(THRESHOLD, b"inherit\n")
    assert results(await query.fs.listdir(QUERY)) == before


@pytest.mark.parametrize("bad", [b"0", b"1001", b"abc", b"12 13", b"-5", b"2.5"])
async def test_invalid_limits_are_refused(core: Core, bad: bytes) -> None:
    await core.fs.mkdir("files")
    await core.fs.write("files/.meta/limit", b"20\n")
    with pytest.raises(pyfuse3.FUSEError) as refused:
        await core.fs.write("files/.meta/limit", bad)
    assert refused.value.errno == errno.EINVAL
    assert (await settings(core, "files"))["limit"] == 20


@pytest.mark.parametrize("bad", [b"tab\there\n", b"x" * 501 + b"\n", b"bell\x07\n"])
async def test_invalid_terms_are_refused(core: Core, bad: bytes) -> None:
    await core.fs.mkdir("gzip")
    for name in ("exclude", "union"):
        await core.fs.write(f"gzip/.meta/{name}", b"keep me\n")
        with pytest.raises(pyfuse3.FUSEError) as refused:
            await core.fs.write(f"gzip/.meta/{name}", bad)
        assert refused.value.errno == errno.EINVAL
        assert await core.fs.read(f"gzip/.meta/{name}") == b"keep me\n"
