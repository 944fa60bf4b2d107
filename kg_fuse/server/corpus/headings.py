"""Where a text document's sections start: its headings, in every shape text files use.

- Markdown ATX headings (``## Title``) and setext headings (a line underlined with
  ``===`` or ``---``, as in CommonMark and reStructuredText);
- in plain text without Markdown headings (``.txt``, ``.rst``, a manual page saved with
  ``man cmd | col -b``): a line in capitals at the left margin (``DESCRIPTION``,
  ``EXIT STATUS``), the way manual pages and RFCs head their sections.

A manual page's running head and foot (``TAR(1)  GNU TAR Manual  TAR(1)``) are not text
of any section, and its ``NAME`` section ("tar - an archiving utility") says what the
whole document is: it is the document's own description, not a section called NAME.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

# Every pattern here runs in time linear in its line: no two quantifiers may take the same
# characters (``(.+?)[ \t#]*$`` and ``.+\s{2,}`` retried each other on a run of spaces:
# quadratic, and a regex holds the GIL, so one long line froze the server for seconds).
_ATX = re.compile(r"^(#{1,6})[ \t]+(.*[^ \t#]|.)[ \t#]*$")
_SETEXT = re.compile(r"^(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CAPITALS = re.compile(r"^[A-Z][A-Z0-9 ,.&/()'+-]{1,58}[A-Z0-9)]$")
_RUNNING_HEAD = re.compile(r"^\S+\(\w+\)\s.*\s\S+\(\w+\)\s*$|^.+\s\s\S+\(\w+\)\s*$")
#: A longer line is no heading nor running head (it is not looked at: linear is not
#: enough when one call on a line of megabytes holds the GIL for seconds).
MAX_HEADING_LINE_CHARS = 1_000
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
NAME_HEADING = "NAME"


@dataclass
class Heading:
    level: int
    title: str
    start: int  # offset of the heading's first line
    body_start: int  # offset just after the heading (and its underline)
    generic: bool = False  # a manual-style capitals heading: label it with the document


def front_matter_end(text: str) -> int:
    """The offset just past a leading YAML front matter block (``---`` ... ``---``), else 0.

    Static-site Markdown starts with one; it is metadata, not text, and its closing
    ``---`` would otherwise underline its last line into a heading.
    """
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return 0
    offset = len(lines[0]) + (len(text) - len(text.removeprefix("\ufeff")))
    for line in lines[1:]:
        offset += len(line)
        if line.rstrip() in ("---", "..."):
            return offset
    return 0  # never closed: not front matter


def find_headings(text: str, suffix: str) -> list[Heading]:
    """Every heading of ``text``, in order; fenced code is never a heading. A text with
    none, not Markdown, gets its capitals headings (a manual page's, an RFC's)."""
    lines = text.splitlines(keepends=True)
    offsets = list(itertools.accumulate((len(line) for line in lines), initial=0))
    skip = front_matter_end(text)
    found: list[Heading] = []
    in_fence = False
    for i, line in enumerate(lines):
        if offsets[i] < skip:
            continue
        stripped = line.rstrip("\r\n").removeprefix("\ufeff" if i == 0 else "")
        if _FENCE.match(stripped):
            in_fence = not in_fence
        elif not in_fence and len(stripped) <= MAX_HEADING_LINE_CHARS:
            heading = _heading_at(lines, offsets, i, stripped)
            if heading is not None:
                found.append(heading)
    if found or suffix.lower() in MARKDOWN_SUFFIXES:
        return found
    return _capitals_headings(lines, offsets)


def _heading_at(lines: list[str], offsets: list[int], i: int, stripped: str
                ) -> Heading | None:
    """The heading line ``i`` starts (``stripped``: the line without its line end): an
    ATX heading, or the title line of a setext heading (underlined by the next line)."""
    if match := _ATX.match(stripped):
        return Heading(len(match.group(1)), match.group(2).strip(), offsets[i],
                       offsets[i + 1])
    if (i + 1 < len(lines) and stripped.strip() and not stripped[0].isspace()
            and (under := _SETEXT.match(lines[i + 1].rstrip("\r\n")))
            and len(under.group(1)) >= 3):
        level = 1 if under.group(1)[0] == "=" else 2
        return Heading(level, stripped.strip(), offsets[i], offsets[i + 2])
    return None


def _capitals_headings(lines: list[str], offsets: list[int]) -> list[Heading]:
    """Lines in capitals that are no running head: plain text's headings (generic: every
    manual page has its OPTIONS)."""
    return [Heading(1, line.strip(), offsets[i], offsets[i + 1], generic=True)
            for i, line in enumerate(lines)
            if _CAPITALS.match(line.rstrip("\r\n")) and not _RUNNING_HEAD.match(line)]


def is_running_head(paragraph: str) -> bool:
    """A manual page's header or footer line, such as ``DF(1)  User Commands  DF(1)``."""
    line = paragraph.strip()
    return (len(line) <= MAX_HEADING_LINE_CHARS and "\n" not in line
            and bool(_RUNNING_HEAD.match(line)))


def generic_label(document_title: str, heading: str) -> str:
    """``OPTIONS`` of ``tar`` is labelled ``tar: Options``: every page has OPTIONS."""
    return f"{document_title}: {heading.capitalize()}"
