"""Every example of output in the user documentation is what the code prints.

Each ``<!-- example: NAME -->`` block of README.md, docs/usage.md and docs/server.md
(``tests.readme.docs``) is produced here by a real server over the small test corpus
(``SMALL_TEST_MODULES``; the kitchen handbook for the examples about its words) and a real
mount, then compared. A drifted example fails naming its file, line and name, with a diff
and the command that regenerates them all (``KG_UPDATE_DOC_EXAMPLES=1``: the blocks are
rewritten with what the code produced; review the diff, then commit it). Times are
written as one fixed time, so a regeneration changes only what really changed.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from kg_fuse.server.threshold.keys import CALIBRATION_KEY
from kg_fuse.server.threshold.presets import FALLBACK_OFFSETS
from tests.fs.conftest import mount_factory  # noqa: F401 - the fixture
from tests.helpers.mount import Mount, fuse_available
from tests.helpers.server import KGServer
from tests.readme.docs import (
    README,
    ROOT,
    UPDATE_COMMAND,
    UPDATE_ENV,
    USER_DOCS,
    Example,
    examples,
    rewrite,
    shell_blocks,
)

pytestmark = [pytest.mark.mount,
              pytest.mark.skipif(not fuse_available(), reason="needs /dev/fuse")]

DOC_TIME = "2026-11-21T10:07:21+00:00"  # every time an example shows
DOC_SERVER_ID = "5b0c8e21d4f34a7c9e1f62a8b3d0c7e4"  # every server identity an example shows
DOC_MOUNTPOINT = "/home/you/kg"  # the mountpoint an example shows
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:\+00:00|Z)")

Produce = Callable[[Mount, KGServer], str]


def _run(mount: Mount, *names: str) -> Path:
    """A query directory, created (with its parents) and listed, as a user would."""
    path = mount.mountpoint
    for name in names:
        path = path / name
        if not path.exists():
            path.mkdir()
        os.listdir(path)
    return path


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    os.listdir(path.parent.parent)  # the next ls, which the example's reader would run


def _lines(text: str, *keys: str) -> str:
    """The lines of a ``key: value`` file whose key starts with one of ``keys``."""
    return "".join(line for line in text.splitlines(keepends=True) if line.startswith(keys))


def result_file(mount: Mount, _server: KGServer) -> str:
    return (_run(mount, "compress data with gzip") / "gzip.compress.concept.md").read_text()


def _why_part(text: str) -> str:
    """A result file's "Why" part: from its heading to the blank line after it."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("Why"))
    return "".join(lines[start:lines.index("\n", start)])


def why_reading(mount: Mount, _server: KGServer) -> str:
    return _why_part((_run(mount, "zipper") / "zipfile.concept.md").read_text())


def status_why(mount: Mount, _server: KGServer) -> str:
    return _lines((_run(mount, "spreadsheet rows") / ".meta" / "status").read_text(),
                  "words found:", "words in no result:", "readings used:",
                  "by meaning alone:")


def threshold_inherit(mount: Mount, _server: KGServer) -> str:
    return (_run(mount, "compress data with gzip") / ".meta" / "threshold").read_text()


def threshold_preset(mount: Mount, _server: KGServer) -> str:
    query = _run(mount, "sort a list")
    _write(query / ".meta" / "threshold", "comprehensive\n")
    text = (query / ".meta" / "threshold").read_text()
    _write(query / ".meta" / "threshold", "standard\n")
    return text


def status_below_threshold(mount: Mount, _server: KGServer) -> str:
    query = _run(mount, "split a path into its parts")
    _write(query / ".meta" / "threshold", "0.95\n")
    return (query / ".meta" / "status").read_text()


def status_cut(mount: Mount, _server: KGServer) -> str:
    return _lines((_run(mount, "compress data with gzip") / ".meta" / "status").read_text(),
                  "results:", "cut:", "more:")


def status_nested(mount: Mount, _server: KGServer) -> str:
    query = _run(mount, "read data from files", "compressed archives")
    _write(query.parent / ".meta" / "threshold", "0.99\n")
    os.listdir(query)
    return _lines((query / ".meta" / "status").read_text(),
                  "thresholds:", "level ", "results:", "filtered by:")


def query_toml_auto_adjusted(mount: Mount, _server: KGServer) -> str:
    return (_run(mount, "gzip compression@0.97") / ".meta" / "query.toml").read_text()


def words_read_as(mount: Mount, _server: KGServer) -> str:
    return _lines((_run(mount, "spaghetti") / ".meta" / "status").read_text(),
                  "words read as:")


def _status_and_unmount(mount: Mount, path: str) -> str:
    """What ``kg-fuse status PATH`` and ``kg-fuse unmount PATH`` say (both exit 1)."""
    transcript = ""
    for command in (["status", path], ["unmount", path]):
        done = subprocess.run([sys.executable, "-m", "kg_fuse.cli", *command], env=mount.env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done
        transcript += f"$ kg-fuse {' '.join(command)}\n{done.stdout}{done.stderr}"
    return transcript


def status_missing(mount: Mount, _server: KGServer) -> str:
    return _status_and_unmount(mount, "/missing")


def status_not_ours(mount: Mount, _server: KGServer) -> str:
    return _status_and_unmount(mount, "/proc")  # another filesystem: refused, untouched


def status_queries(mount: Mount, server: KGServer) -> str:
    """``kg-fuse status`` of a mount: whose saved queries it shows."""
    done = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "status",
                           str(mount.mountpoint)], env=mount.env, capture_output=True,
                          text=True, timeout=60, check=True)
    with server.client() as http:
        server_id = http.get("/database/epoch").json()["server_id"]
    return (f"$ kg-fuse status ~/kg\n{done.stdout}"
            .replace(str(mount.mountpoint), DOC_MOUNTPOINT).replace(server_id, DOC_SERVER_ID)
            .replace(server.api_url, "http://127.0.0.1:8765"))


def epoch_response(_mount: Mount, server: KGServer) -> str:
    with server.client() as http:
        answer = http.get("/database/epoch").json()
    return json.dumps({**answer, "server_id": DOC_SERVER_ID}) + "\n"


def presets_rule(_mount: Mount, server: KGServer) -> str:
    with server.client() as http:
        answer = http.get("/database/epoch").json()
    with closing(sqlite3.connect(f"file:{server.db_path}?mode=ro", uri=True)) as db:
        report = json.loads(db.execute("SELECT value FROM settings WHERE key = ?",
                                       (CALIBRATION_KEY,)).fetchone()[0])
    median = statistics.median(p[1] for p in report["probes"] if p[1] > 0)
    default, presets = answer["default_threshold"], answer["threshold_presets"]
    fixed = {word: round(default + offset, 2) for word, offset in FALLBACK_OFFSETS.items()}
    return (f"calibrated over {report['concept_count']} concepts: default {default}, median "
            f"relevant-probe score {median:.3f}, noise median {report['gibberish_median']}\n"
            f"published: exact {presets['exact']}, standard {presets['standard']}, "
            f"comprehensive {presets['comprehensive']}\n"
            f"the fixed offsets would give: exact {fixed['exact']}, "
            f"comprehensive {fixed['comprehensive']}\n")


# name -> producer, over the test corpus (first) or the kitchen handbook
ON_TEST_CORPUS: dict[str, Produce] = {
    "result-file": result_file,
    "why-reading": why_reading,
    "status-why": status_why,
    "threshold-inherit": threshold_inherit,
    "threshold-preset": threshold_preset,
    "status-below-threshold": status_below_threshold,
    "status-nested": status_nested,
    "status-cut": status_cut,
    "query-toml-auto-adjusted": query_toml_auto_adjusted,
    "status-missing": status_missing,
    "status-not-ours": status_not_ours,
    "epoch-response": epoch_response,
    "status-queries": status_queries,
    "presets-rule": presets_rule,
}
ON_KITCHEN: dict[str, Produce] = {
    "words-read-as": words_read_as,
}


NOTES = r"printf '# Sourdough\n\nFeed the starter the night before baking.\n' > ~/notes.md"
RECIPES_NOTE_IN = (f"mkdir -p ontology/Recipes && {NOTES} && cp ~/notes.md ontology/Recipes/ingest/"
                   " && until [ -e ontology/Recipes/documents/notes.md ]; do sleep 0.5; done")

# name of a block of commands -> what a reader has done before it (in the mount's root,
# with a home of its own), and what is tidied after it
RUNS: dict[str, str] = {
    "ontologies": "",
    "document-delete": f"{RECIPES_NOTE_IN} && mkdir -p ~/kg",
    "ingest": f"mkdir -p ontology/Recipes && {NOTES}",
    "ingest-too-large": "mkdir -p ontology/Recipes",
    "ingest-image": r"mkdir -p ontology/Recipes && "
                    r"printf '\x89PNG\r\n\x1a\n%0500d' 0 > ~/photo.png",
    "links": 'mkdir "read data from files"',
    "nested-remove": 'mkdir -p "read files/compressed"',
    "presets": 'mkdir "sort a list"',
    "write-styles": 'mkdir -p "compress data with gzip"',
    "exclude-union": 'mkdir -p "compress data with gzip" && cd "compress data with gzip"',
    "xattrs": 'mkdir -p "compress data with gzip" && ls "compress data with gzip" >/dev/null',
    "search-request": "",
}
AFTER: dict[str, str] = {
    "document-delete": "kg-fuse unmount ~/kg",
}


def canonical(text: str) -> str:
    return _TIME.sub(DOC_TIME, text)


def check(producers: dict[str, Produce], mount: Mount, server: KGServer) -> None:
    drifted = []
    for example in examples():
        produce = producers.get(example.name) if example.kind == "example" else None
        if produce is None:
            continue
        produced = canonical(produce(mount, server))
        if produced == example.body:
            continue
        if os.environ.get(UPDATE_ENV):
            rewrite(example, produced)
            continue
        drifted.append(_drift(example, produced))
    assert not drifted, "\n".join(drifted) + f"\nregenerate them all with: {UPDATE_COMMAND}"


def _drift(example: Example, produced: str) -> str:
    diff = difflib.unified_diff(example.body.splitlines(), produced.splitlines(),
                                "documented", "produced", lineterm="")
    return f"{example.where}: example '{example.name}' drifted:\n" + "\n".join(diff)


def test_every_marked_example_has_one_producer_and_every_producer_one_example() -> None:
    names = [e.name for e in examples() if e.kind == "example"]
    producers = {**ON_TEST_CORPUS, **ON_KITCHEN}
    assert sorted(set(names)) == sorted(names), "an example name is used twice"
    assert sorted(names) == sorted(producers), "markers and producers differ"
    runs = [e.name for e in examples() if e.kind == "run"]
    assert sorted(runs) == sorted(RUNS), "run markers and their preludes differ"


@pytest.fixture(scope="module")
def pristine_server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    """The test corpus's store as built, which no other test has changed (its epoch)."""
    server = kg_server_clone()
    yield server
    server.stop()



@pytest.mark.timeout(300)
def test_the_examples_over_the_test_corpus_are_what_the_code_prints(
        mount_factory: Any, pristine_server: KGServer) -> None:  # noqa: F811
    mount = mount_factory(server=pristine_server, extra_args=["--poll-interval", "3600"])
    check(ON_TEST_CORPUS, mount, pristine_server)


@pytest.mark.timeout(300)
def test_the_examples_over_the_kitchen_handbook_are_what_the_code_prints(
        mount_factory: Any, kitchen_server: KGServer) -> None:  # noqa: F811
    mount = mount_factory(server=kitchen_server, extra_args=["--poll-interval", "3600"])
    check(ON_KITCHEN, mount, kitchen_server)


@pytest.fixture(scope="module")
def runs_server(kg_server_clone: Callable[..., KGServer]) -> Iterator[KGServer]:
    """A server for the blocks of commands alone: they ingest and delete documents."""
    server = kg_server_clone()
    yield server
    server.stop()


@pytest.mark.timeout(600)
def test_every_marked_block_of_commands_runs_in_a_mount(
        mount_factory: Any, runs_server: KGServer, tmp_path: Path) -> None:  # noqa: F811
    """Each ``run:`` block, in document order, in one mount, from its root, with a home
    of its own (``~/notes.md``, ``~/kg``)."""
    mount = mount_factory(server=runs_server, extra_args=["--poll-interval", "1"],
                          allowed_log=[r"WARNING kg_fuse\.fs\.queries\.ingest"])
    home = tmp_path / "home"
    home.mkdir()
    env = {**mount.env, "HOME": str(home), "PYTHONPATH": str(ROOT),
           "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    failed = []
    try:
        for block in (e for e in examples() if e.kind == "run"):
            failed += _run_block(block, mount, env)
    finally:
        _unmount_under(home)
    assert not failed, "\n".join(failed)


def _run_block(block: Example, mount: Mount, env: dict[str, str]) -> list[str]:
    script = "\n".join(["set -e", "trap 'echo \"FAILED: $BASH_COMMAND\" >&2' ERR",
                        RUNS[block.name], block.body, AFTER.get(block.name, "")])
    try:
        done = subprocess.run(["bash", "-c", script], cwd=mount.mountpoint, env=env,
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        return [f"{block.where}: the commands of '{block.name}' took over {exc.timeout:g}s"]
    if done.returncode == 0:
        return []
    return [f"{block.where}: the commands of '{block.name}' failed "
            f"(exit {done.returncode}): {done.stderr.strip()[-1500:]}"]


def _unmount_under(home: Path) -> None:
    """A block that mounts (``kg-fuse mount ~/kg``) and failed before unmounting."""
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        points = [line.split()[4] for line in table if line.split()[4].startswith(str(home))]
    for point in points:
        subprocess.run(["fusermount3", "-u", "-z", point], check=False)


# README sections whose shell blocks tests/readme/test_readme_blocks.py runs
README_RUN_SECTIONS = ("Using it", "Stopping")


def readme_run_lines() -> set[int]:
    """The fence lines of the README blocks its own test runs: the demo, and every
    block under "Using it" and "Stopping"."""
    lines, section, run = README.read_text(encoding="utf-8").splitlines(), "", set()
    for number, line in enumerate(lines, 1):
        if line.startswith("## "):
            section = line[3:].strip()
        elif line == "```sh" and (section.startswith(README_RUN_SECTIONS) or (
                section.startswith("Two commands") and "demo.sh" in lines[number])):
            run.add(number)
    return run


def test_every_shell_block_of_the_user_docs_runs_or_says_why_not() -> None:
    """Every documented command is run by a test, or its block is marked
    ``<!-- illustrative: WHY -->``."""
    marked = {(e.path, e.line + 1) for e in examples() if e.kind in ("run", "illustrative")}
    readme = readme_run_lines()
    unmarked = [f"{path.relative_to(ROOT)}:{line}"
                for path in USER_DOCS for line in shell_blocks(path)
                if (path, line) not in marked and not (path == README and line in readme)]
    assert not unmarked, ("shell blocks neither run nor marked illustrative (add a "
                          "'<!-- run: NAME -->' marker and its prelude in RUNS, or "
                          "'<!-- illustrative: WHY -->'): " + ", ".join(unmarked))
