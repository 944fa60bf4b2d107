"""``kg-fuse eval`` end to end: a real server, credentials found as the mount finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.server import KGServer

SET = """
name = "small"
gibberish = ["asdfgh qwerty zxcvb", "qqqq"]

[[query]]
text = "compress data with gzip"
expect = ["gzip.compress"]

[[query]]
text = "a query whose expected concept does not exist"
expect = ["no.such.concept"]
"""


def _eval(server: KGServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kg_fuse.cli", "eval", *args],
        env={**os.environ, **server.env}, capture_output=True, text=True, timeout=300)


def test_eval_reports_hits_misses_and_the_default(kg_server: KGServer, tmp_path: Path) -> None:
    set_file = tmp_path / "small.toml"
    set_file.write_text(SET)
    done = _eval(kg_server, "--set", str(set_file), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    with kg_server.client("admin") as admin:
        default = admin.get("/admin/config/search-threshold").json()["threshold"]
    summary = data["summary"]
    assert summary["default_threshold"] == default
    assert summary["gibberish_listing_anything"] == 0
    found, missing = data["relevant"]
    assert found["hit"] and found["rank"] == found["listed_rank"] == 1
    assert found["best_score"] >= default
    assert not missing["hit"] and missing["best_score"] is None
    assert summary["relevant_listed"] == 1 and summary["relevant_listed_pct"] == 50.0

    text = _eval(kg_server, "--set", str(set_file))
    assert text.returncode == 0, text.stderr
    assert f"default threshold {default:.2f}" in text.stdout
    assert "Misses (1)" in text.stdout and "no.such.concept" in text.stdout


def test_eval_against_a_dead_server_says_so(kg_server: KGServer, tmp_path: Path) -> None:
    done = _eval(kg_server, "--set", "kitchen", "--api-url", "http://127.0.0.1:9",
                 "--client-id", "x", "--client-secret-file", str(kg_server.credentials_path))
    assert done.returncode == 1
    assert "http://127.0.0.1:9" in done.stderr and "Traceback" not in done.stderr


def test_eval_reports_each_of_several_sets(kg_server: KGServer, tmp_path: Path) -> None:
    first, second = tmp_path / "small.toml", tmp_path / "other.toml"
    first.write_text(SET)
    second.write_text(SET.replace('name = "small"', 'name = "other"').replace(
        '"compress data with gzip"', '"decompress a gzip file"'))
    done = _eval(kg_server, "--set", str(first), "--set", str(second), "--json")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["sets"]
    assert [run["set"] for run in runs] == ["small", "other"]
    assert all(run["summary"]["gibberish_listing_anything"] == 0 for run in runs)
    text = _eval(kg_server, "--set", str(first), "--set", str(second)).stdout
    assert "set 'small'" in text and "set 'other'" in text
    table = text.split("\n\n")[-1].splitlines()
    assert table[0].split()[:2] == ["set", "default"]
    assert [line.split()[0] for line in table[1:]] == ["small", "other"]


def test_eval_lists_what_the_mount_lists_and_no_cut_lists_all(kg_server: KGServer,
                                                              tmp_path: Path) -> None:
    set_file = tmp_path / "small.toml"
    set_file.write_text(SET)
    cut = json.loads(_eval(kg_server, "--set", str(set_file), "--json").stdout)
    everything = json.loads(_eval(kg_server, "--set", str(set_file), "--json",
                                  "--no-cut").stdout)
    narrow, whole = cut["relevant"][0], everything["relevant"][0]
    assert narrow["listed_labels"][0] == "gzip.compress" and narrow["hit"]
    assert 1 <= narrow["listed"] <= 12 < whole["listed"] == 50
    assert whole["listed_labels"][:narrow["listed"]] == narrow["listed_labels"]
    assert cut["summary"]["cut"] and not everything["summary"]["cut"]
    assert cut["summary"]["listing_size"]["median"] < 12
