"""A listing is the answer: an inheriting or preset listing stops where its scores fall
away from the best one, on the real app and the real model (kernel-free tier)."""

from __future__ import annotations

from kg_fuse.client.api import KgApiClient
from kg_fuse.listing.execute import execute
from kg_fuse.listing.plan import Level, QueryPlan
from kg_fuse.listing.presets import PRESET_SIZES
from tests.core.test_core_parts import CountingTransport
from tests.helpers.core import API_URL, Core, SearchAnswersRewritten

NARROW = "compress data with gzip"  # gzip.compress, then a drop
BROAD = "compression"  # every compression module, close together
DEPTH = PRESET_SIZES["standard"] + 1  # what a standard listing fetches: its size and one
CONTRACT_FIELDS = {"query", "count", "results", "below_threshold_count",
                   "suggested_threshold", "top_match", "threshold_used", "offset"}


def results(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".concept.md")]


async def status(core: Core, query: str) -> dict[str, str]:
    text = (await core.fs.read(f"{query}/.meta/status")).decode()
    return dict(line.split(": ", 1) for line in text.splitlines())


async def test_a_narrow_query_lists_its_answer_and_a_broad_one_lists_more(core: Core) -> None:
    await core.fs.mkdir(NARROW)
    await core.fs.mkdir(BROAD)
    narrow = results(await core.fs.listdir(NARROW))
    broad = results(await core.fs.listdir(BROAD))
    assert "gzip.compress.concept.md" in narrow
    assert 1 <= len(narrow) < len(broad) <= PRESET_SIZES["standard"]
    lines = await status(core, NARROW)
    assert lines["results"] == str(len(narrow))
    assert lines["cut"].startswith(f"after {len(narrow)} of at least {DEPTH} matches: the score "
                                   "falls from ")
    assert "more than 0.16 below the best" in lines["cut"]
    assert lines["cut"] != (await status(core, BROAD))["cut"]


# Regression test (issue 34): where the score gap stopped a listing, 'more' still offered
# comprehensive, which lists the same files.
async def test_past_the_score_gap_more_offers_no_preset(core: Core) -> None:
    for query in (NARROW, "sort a list"):
        await core.fs.mkdir(query)
        listed = results(await core.fs.listdir(query))
        lines = await status(core, query)
        assert "more than 0.16 below the best" in lines["cut"]
        assert "comprehensive" not in lines["more"], lines
        await core.fs.write(f"{query}/.meta/threshold", b"comprehensive\n")
        assert results(await core.fs.listdir(query)) == listed  # as the status said


# Regression test (issue 34): a listing the size stopped claimed the score fell (from 0.72
# to 0.72), and an empty one had no 'cut' line at all.
async def test_the_cut_line_says_what_stopped_the_listing_or_why_it_is_empty(
        core: Core) -> None:
    await core.fs.mkdir(BROAD)
    listed = results(await core.fs.listdir(BROAD))
    cut = (await status(core, BROAD))["cut"]
    assert cut.startswith(f"after {len(listed)} of at least {DEPTH} matches: the standard listing "
                          f"size is {len(listed)}; the next match scores ")
    assert "within 0.16 of the best" in cut and "falls" not in cut
    gibberish = "qwertyuiop"
    await core.fs.mkdir(gibberish)
    assert results(await core.fs.listdir(gibberish)) == []
    default = core.server.graph.default_threshold()
    assert (await status(core, gibberish))["cut"] == (
        f"nothing listed: no concept reached the threshold {default}; the server reported "
        "no near miss")
    split = "split a path into its parts"
    await core.fs.mkdir(split)
    await core.fs.write(f"{split}/.meta/threshold", b"0.95\n")
    assert results(await core.fs.listdir(split)) == []
    lines = await status(core, split)
    best = lines["near misses"].split(", ")[0]  # "posixpath.split (0.8095)"
    label, score = best[:-1].split(" (")
    assert lines["cut"] == (f"nothing listed: no concept reached the threshold 0.95; the best "
                            f"scored {score} ({label})")
    await core.fs.mkdir(f"{BROAD}/{split}")
    await core.fs.write(f"{BROAD}/.meta/threshold", b"0.99\n")
    assert results(await core.fs.listdir(f"{BROAD}/{split}")) == []
    assert (await status(core, f"{BROAD}/{split}"))["cut"].startswith(
        "nothing listed: none of this query's ")


# Regression test (issue 42): a listing fetched 50 matches to list at most 12, and its
# level line said "50 matches" of a term with more: it fetches its size and one more
# (the cut needs no more), and the status says "at least" of a count it did not fetch to
# the end.
async def test_the_status_claims_no_count_beyond_what_was_fetched(core: Core) -> None:
    await core.fs.mkdir(BROAD)
    listed = results(await core.fs.listdir(BROAD))
    lines = await status(core, BROAD)
    assert lines["level 1"].endswith(f", this query; at least {DEPTH} matches")
    assert lines["cut"].startswith(f"after {len(listed)} of at least {DEPTH} matches: ")
    await core.fs.write(f"{BROAD}/.meta/limit", b"1000\n")  # the ranking to its end
    everything = results(await core.fs.listdir(BROAD))
    lines = await status(core, BROAD)
    assert DEPTH < len(everything) < 1000
    assert lines["level 1"].endswith(f", this query; {len(everything)} matches")
    assert lines["cut"] == ("none: .meta/limit is written, so every match above the "
                            "threshold is listed")


async def test_writing_a_limit_lists_everything_above_the_threshold(core: Core) -> None:
    """The one explicit way past the cut, as ``more`` offers it; a threshold of its own
    does not (a higher threshold never lists more, issue 39)."""
    await core.fs.mkdir(NARROW)
    cut = results(await core.fs.listdir(NARROW))
    default = core.server.graph.default_threshold()
    assert (await status(core, NARROW))["more"] == (
        "write a number (up to 1000) to .meta/limit to list every match above the "
        f"threshold {default}, up to that many")
    await core.fs.write(f"{NARROW}/.meta/threshold", f"{default}\n".encode())
    assert results(await core.fs.listdir(NARROW)) == cut  # its own value: cut the same
    await core.fs.write(f"{NARROW}/.meta/limit", b"50\n")
    everything = results(await core.fs.listdir(NARROW))
    assert set(cut) < set(everything) and len(everything) == 50  # the limit
    assert (await status(core, NARROW))["cut"] == (
        "after 50 of at least 50 matches: .meta/limit is 50")
    await core.fs.write(f"{NARROW}/.meta/limit", b"default\n")
    assert results(await core.fs.listdir(NARROW)) == cut


async def test_each_preset_lists_at_most_its_size(core: Core) -> None:
    sizes = {}
    for word in PRESET_SIZES:
        query = f"{BROAD}@{word}"  # the same words at each preset
        await core.fs.mkdir(query)
        sizes[word] = len(results(await core.fs.listdir(query)))
    assert 1 <= sizes["exact"] <= 5
    assert sizes["exact"] < sizes["standard"] <= 12 < sizes["comprehensive"] <= 25


async def test_a_nested_query_is_cut_after_its_levels_are_combined(core: Core) -> None:
    child = f"{BROAD}/read a file"
    await core.fs.mkdir(BROAD)
    await core.fs.mkdir(child)
    nested = results(await core.fs.listdir(child))
    assert 1 <= len(nested) <= PRESET_SIZES["standard"]
    lines = await status(core, child)
    assert lines["thresholds"].startswith("2 levels;")
    assert "cut" in lines
    # the enclosing level's threshold still filters; a written limit lists all
    await core.fs.write(f"{child}/.meta/limit", b"1000\n")
    everything = results(await core.fs.listdir(child))
    assert set(nested) <= set(everything) and len(everything) > len(nested)


async def test_the_first_ls_makes_no_more_requests_than_the_listing_shows(core: Core
                                                                          ) -> None:
    counting = CountingTransport(core.server.transport())
    core.client._http._transport = counting  # noqa: SLF001 - count what the mount sends
    await core.fs.mkdir(NARROW)
    listed = results(await core.fs.listdir(NARROW))
    assert counting.count("POST /query/search") == 1
    assert counting.searches[0]["limit"] == DEPTH  # not 50: the cut reads no more
    # one detail request per listed file: before the cut, one per file of the 50
    details = sum(1 for seen in counting.seen if seen.startswith("GET /query/concept/"))
    assert details == len(listed) < 50


def platform_shape(body: dict) -> dict:
    """The real app's answer cut to the platform's contract: a search response with
    none of the embedded server's own fields (presets, readings, near misses)."""
    stripped = {k: v for k, v in body.items() if k in CONTRACT_FIELDS}
    assert stripped != body  # the embedded server does send more
    return stripped


async def test_the_cut_is_the_same_against_the_platform_s_api_shape(core: Core) -> None:
    shaped = SearchAnswersRewritten(core.server.transport(), platform_shape)
    platform = KgApiClient(API_URL, core.server.credentials_of("user"), timeout=60,
                           transport=shaped)
    try:
        for text in (NARROW, BROAD):
            plan = QueryPlan((Level(text, None),), 50, size=PRESET_SIZES["standard"])
            ours = await execute(core.client, plan)
            theirs = await execute(platform, plan)
            assert theirs.primary.threshold_presets is None  # the platform sends none
            assert [h.concept_id for h in theirs.hits] == [h.concept_id for h in ours.hits]
            assert theirs.cut == ours.cut and 1 <= theirs.cut.kept <= 12
    finally:
        await platform.aclose()


# Regression test (issue 40): where nothing was cut ('cut: none: all N ...'), 'more'
# offered nothing, though a lower threshold listed more.
async def test_where_nothing_was_cut_more_names_the_lower_threshold_that_lists_more(
        core: Core) -> None:
    split = "split a path into its parts"
    await core.fs.mkdir(split)
    offered = []
    for threshold in ("0.85", "0.8", "0.75", "0.7", "0.65"):
        await core.fs.write(f"{split}/.meta/threshold", f"{threshold}\n".encode())
        listed = results(await core.fs.listdir(split))
        lines = await status(core, split)
        if not lines["cut"].startswith("none: ") or "more" not in lines:
            continue
        command = lines["more"].rsplit("; ", 1)[1]  # "echo 0.71 > .meta/threshold lists it"
        assert command.startswith("echo ") and command.endswith(" > .meta/threshold lists it")
        lower = command.removeprefix("echo ").split(" > ")[0]
        await core.fs.write(f"{split}/.meta/threshold", f"{lower}\n".encode())
        more = results(await core.fs.listdir(split))
        assert set(listed) < set(more), (threshold, lines["more"], listed, more)
        offered.append(threshold)
    assert offered, "no threshold left a listing uncut with a match just below it"
