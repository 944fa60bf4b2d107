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
    """Every heading of ``text``, in order; fenced code is never a heading."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    skip = front_matter_end(text)
    found: list[Heading] = []
    in_fence = False
    for i, line in enumerate(lines):
        if offsets[i] < skip:
            continue
        stripped = line.rstrip("\r\n").removeprefix("\ufeff" if i == 0 else "")
        if _FENCE.match(stripped):
            in_fence = not in_fence
        elif in_fence or len(stripped) > MAX_HEADING_LINE_CHARS:
            continue
        elif match := _ATX.match(stripped):
            found.append(Heading(len(match.group(1)), match.group(2).strip(), offsets[i],
                                 offsets[i + 1]))
        elif (i + 1 < len(lines) and stripped.strip() and not stripped[0].isspace()
              and (under := _SETEXT.match(lines[i + 1].rstrip("\r\n")))
              and len(under.group(1)) >= 3):
            level = 1 if under.group(1)[0] == "=" else 2
            found.append(Heading(level, stripped.strip(), offsets[i], offsets[i + 2]))
    if found or suffix.lower() in MARKDOWN_SUFFIXES:
        return found
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
