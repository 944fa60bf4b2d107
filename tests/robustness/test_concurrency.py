"""Concurrency: identical concurrent searches run once (the server's request log has one
line for them), and many processes listing and reading many queries at once all finish
without errors and see the same thing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.mount import Mount
from tests.robustness.conftest import RELEVANT, result_names, status_lines

pytestmark = pytest.mark.mount

QUERIES = [
    "compress data with gzip", "zlib checksums", "tar archives", "csv files", "json parsing",
    "base64 encoding", "zip files", "bz2 compression", "lzma streams", "copy files",
    "temporary files", "glob patterns", "match file names", "compare files",
    "read lines from a file", "decode binary data", "quoted printable", "mime types",
    "file paths", "read configuration",
]

# One process's view of the mount: every query's listing, every file's digest, and the
# number of results .meta/status reports. Exits non-zero on any error.
VIEW_SCRIPT = r"""
import hashlib, json, os, sys
root = sys.argv[1]
view = {"root": sorted(os.listdir(root)), "queries": {}}
for query in view["root"]:
    if query == "ontology":  # the server's ontologies, not a saved query
        continue
    d = os.path.join(root, query)
    files = {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".concept.md"):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            assert os.stat(os.path.join(d, name)).st_size == len(data), name
            files[name] = hashlib.sha256(data).hexdigest()
    with open(os.path.join(d, ".meta", "status")) as f:
        status = dict(l.split(": ", 1) for l in f.read().splitlines() if ": " in l)
    view["queries"][query] = {"files": files, "results": status["results"]}
print(json.dumps(view, sort_keys=True))
"""


def run_concurrently(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def worker(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            results[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", ["ls", "ls -l", "ls and status"])
def test_identical_concurrent_fetches_search_once(
        mount_factory: Callable[..., Mount], kg_admin: Any, what: str) -> None:
    mount = mount_factory()
    text = f"{RELEVANT} ({what})"  # a text no other test searches for
    mount.path(text).mkdir()  # no threshold suffix: no creation probe
    before = len(kg_admin.search_log(text))
    query = mount.path(text)

    def one(i: int) -> Any:
        if what == "ls":
            return result_names(query)
        if what == "ls -l":
            return sorted((n, os.stat(query / n).st_size) for n in result_names(query))
        return result_names(query) if i % 2 else status_lines(mount, text)["results"]

    results = run_concurrently(12, one)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    assert len(kg_admin.search_log(text)) - before == 1, "one listing, searched more than once"
    listings = [r for r in results if isinstance(r, list)]
    assert listings and all(r == listings[0] for r in listings)
    assert listings[0], "nothing found"


@pytest.mark.timeout(120)
def test_eight_processes_reading_twenty_queries_see_the_same_thing(
        mount_factory: Callable[..., Mount], kg_admin: Any) -> None:
    mount = mount_factory()
    for i, text in enumerate(QUERIES):
        mount.path(text).mkdir()
        if i % 4 == 1:  # every match above 0.3: fifty files
            mount.path(text, ".meta", "threshold").write_text("0.3\n")
            mount.path(text, ".meta", "limit").write_text("50\n")
    before = {text: len(kg_admin.search_log(text)) for text in QUERIES}

    procs = [subprocess.Popen([sys.executable, "-c", VIEW_SCRIPT, str(mount.mountpoint)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        outputs.append(json.loads(out))
    assert all(o == outputs[0] for o in outputs), "the processes saw different things"
    view = outputs[0]
    assert view["root"] == sorted([*QUERIES, "ontology"])
    for text in QUERIES:
        entry = view["queries"][text]
        assert int(entry["results"]) == len(entry["files"]), text
    assert sum(len(v["files"]) for v in view["queries"].values()) > 200
    # every query was searched once, however many processes asked at the same time
    searched = {text: len(kg_admin.search_log(text)) - before[text] for text in QUERIES}
    assert searched == dict.fromkeys(QUERIES, 1)
