"""Pieces testable without a server: calibration rule and table, parsers, the CLI."""

from __future__ import annotations

import argparse
import subprocess
import sys

from kg_fuse.server.corpus.chapters import FALLBACK_CHAPTER, chapter_of
from kg_fuse.server.corpus.markdown import parse_text_document
from kg_fuse.server.corpus.stdlib import (
    SMALL_TEST_MODULES,
    build_stdlib_corpus,
    discover_modules,
)
from kg_fuse.server.threshold.calibrate import choose_default


def test_default_rule_sits_just_above_the_noise_floor() -> None:
    assert choose_default(0.46) == 0.49  # not 0.50 through float noise
    assert choose_default(0.453) == 0.49
    assert choose_default(0.397) == 0.43
    assert choose_default(0.0) == 0.03


def test_markdown_sections_become_concepts() -> None:
    text = ("Intro paragraph.\n\n# Title\n\nFirst para\nwrapped.\n\nSecond para.\n\n"
            "```\n# not a heading\n```\n\n## Sub\n\nSub text.\n")
    doc = parse_text_document(text, "notes/readme.md", "Notes")
    labels = [c.label for c in doc.concepts]
    assert labels == ["readme", "Title", "Sub"]
    title = doc.concepts[1]
    assert title.description == "First para wrapped."
    assert [q for _, q in title.evidence][:2] == ["First para\nwrapped.", "Second para."]
    assert doc.concepts[2].relations == [("PART_OF", title.seed)]
    for chunk in doc.chunks:
        assert text[chunk.start:chunk.end] == chunk.text
    assert doc.id.startswith("sha256:")


def test_stdlib_discovery_skips_tests_and_private_modules() -> None:
    modules = discover_modules()
    assert len(modules) > 300
    assert {"gzip", "json", "email.utils", "os"} <= set(modules)
    for name in modules:
        parts = name.split(".")
        assert not any(p.startswith("_") for p in parts), name
        assert parts[0] not in {"test", "idlelib", "lib2to3", "turtledemo", "ensurepip"}
        assert "test" not in parts and "tests" not in parts


def test_small_corpus_concepts_and_grouping() -> None:
    docs = build_stdlib_corpus(SMALL_TEST_MODULES)
    by_name = {d.name: d for d in docs}
    assert by_name["gzip"].ontology == "Data Compression and Archiving"
    assert by_name["csv"].ontology == "File Formats"
    assert by_name["posixpath"].ontology == "File and Directory Access"
    labels = {c.label for d in docs for c in d.concepts}
    assert {"gzip.compress", "gzip.GzipFile", "shutil.copytree", "json"} <= labels
    gzip_compress = next(c for c in by_name["gzip"].concepts if c.label == "gzip.compress")
    assert gzip_compress.embedding_text() == (
        "gzip.compress: Compress data in one shot and return the compressed string.")
    assert chapter_of("email.mime.text") == "Internet Data Handling"
    assert chapter_of("nosuchmodule") == FALLBACK_CHAPTER


def test_register_adds_subcommands_with_funcs() -> None:
    from kg_fuse.server import server_commands as commands

    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["serve", "--modules", "gzip,json", "--port", "9999"])
    assert args.func is commands.serve_command and args.modules == ["gzip", "json"]
    assert args.host == "127.0.0.1" and args.port == 9999 and args.corpus == "stdlib"
    assert parser.parse_args(["index"]).func is commands.index_command
    calibrate = parser.parse_args(["calibrate", "--write"])
    assert calibrate.func is commands.calibrate_command and calibrate.write


def test_commands_module_imports_nothing_heavy() -> None:
    code = ("import sys, kg_fuse.server.server_commands\n"
            "heavy = {'fastapi', 'numpy', 'torch', 'sentence_transformers', 'uvicorn'}\n"
            "print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_serve_refuses_a_remote_host_without_allow_remote() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kg_fuse.cli", "serve", "--host", "0.0.0.0"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--allow-remote" in result.stderr
