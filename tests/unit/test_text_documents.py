"""Text documents of every common shape become sensible concepts: Markdown, setext and
reStructuredText headings, manual pages saved as plain text; a folder with an empty file
or the same file twice ingests what it can."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kg_fuse.server.corpus.markdown import parse_text_document, read_folder

MAN_PAGE = """DF(1)\t\t\t\t User Commands\t\t\t\t DF(1)

NAME
       df - report file system space usage

SYNOPSIS
       df [OPTION]... [FILE]...

DESCRIPTION
       df  displays the amount of space available on the file system contain\u2010
       ing each file name argument.

OPTIONS
       -h, --human-readable
              print sizes in powers of 1024 (e.g., 1023M)

GNU coreutils 9.1\t\tSeptember 2022\t\t\t\t DF(1)
"""


def labels_and_descriptions(text: str, filename: str) -> dict[str, str]:
    doc = parse_text_document(text, filename, "docs")
    return {c.label: c.description for c in doc.concepts}


def test_a_manual_page_is_its_command_with_a_concept_per_section() -> None:
    found = labels_and_descriptions(MAN_PAGE, "df.txt")
    assert list(found) == ["df", "df: Synopsis", "df: Description", "df: Options"]
    assert found["df"] == "df - report file system space usage"
    assert found["df: Description"].endswith("containing each file name argument.")
    assert not any("DF(1)" in d or "September 2022" in d for d in found.values())
    doc = parse_text_document(MAN_PAGE, "df.txt", "docs")
    whole = doc.concepts[0].seed
    assert all(c.relations == [("PART_OF", whole)] for c in doc.concepts[1:])


def test_setext_and_restructuredtext_headings_are_headings() -> None:
    text = ("Archives\n========\n\nStore many files in one.\n\n"
            "Compression\n-----------\n\nMake files smaller.\n")
    for name in ("notes.md", "notes.rst", "notes.txt"):
        found = labels_and_descriptions(text, name)
        assert found == {"Archives": "Store many files in one.",
                         "Compression": "Make files smaller."}, name


def test_a_byte_order_mark_and_windows_line_ends_change_nothing() -> None:
    text = "# Bread\n\nKnead it.\n\n## Proving\n\nLet it rise.\n"
    plain = labels_and_descriptions(text, "bread.md")
    assert plain == {"Bread": "Knead it.", "Proving": "Let it rise."}
    assert labels_and_descriptions("\ufeff" + text.replace("\n", "\r\n"), "bread.md") == plain
    two = "# Bread\r\n\r\nKnead it.\r\n\r\nThen shape it.\r\n"
    assert parse_text_document(two, "b.md", "o").concepts[0].examples == "Then shape it."


def test_front_matter_is_neither_text_nor_a_heading() -> None:
    text = "---\ntitle: Bread\ntags: [baking]\n---\n\nKnead it.\n\n## Proving\n\nRise.\n"
    assert labels_and_descriptions(text, "bread.md") == {"bread": "Knead it.",
                                                         "Proving": "Rise."}
    unclosed = "---\nKnead it.\n"  # a rule, not front matter: the text stays
    assert labels_and_descriptions(unclosed, "b.md") == {"b": "--- Knead it."}


def test_capitals_are_headings_only_in_plain_text_without_markdown_headings() -> None:
    text = "# Guide\n\nRead this.\n\nWARNING\n\nHot pans burn.\n"
    assert list(labels_and_descriptions(text, "guide.txt")) == ["Guide"]
    plain = "Intro text.\n\nWARNING\n\nHot pans burn.\n"
    assert list(labels_and_descriptions(plain, "guide.md")) == ["guide"]
    assert list(labels_and_descriptions(plain, "guide.txt")) == ["guide", "guide: Warning"]


def test_a_folder_skips_empty_files_and_second_copies(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    (tmp_path / "a.txt").write_text("Knead the dough.\n")
    (tmp_path / "b.txt").write_text("Knead the dough.\n")  # the same document again
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "more.txt").write_text("")
    with caplog.at_level(logging.WARNING):
        docs = read_folder(tmp_path, "kitchen")
    assert [d.filename for d in docs] == ["a.txt"]
    assert "b.txt: the same content as a.txt" in caplog.text
    assert "empty.txt: it is empty" in caplog.text and "more.txt: it is empty" in caplog.text
