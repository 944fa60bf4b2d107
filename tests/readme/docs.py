"""The user documentation as the tests read it: sections, the shell blocks a user pastes,
and the examples of output, each marked with the name of what produces it.

An example of output is a fenced block right under a marker, an HTML comment that
Markdown does not show (indented like the block, inside a list item)::

    <!-- example: status-below-threshold -->
    ```
    query: ...
    ```

``tests/readme/test_doc_examples.py`` produces each named example with the code (a real
server and a real mount) and compares; run with ``KG_UPDATE_DOC_EXAMPLES=1`` it writes
what the code produced into the block instead. A block of commands under
``<!-- run: NAME -->`` is run in a mount, as the README's blocks are, and must succeed.
A block of commands that cannot run there is marked ``<!-- illustrative: WHY -->``, on
one line: every shell block of the user docs is run or says why not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
USER_DOCS = (README, ROOT / "docs" / "usage.md", ROOT / "docs" / "server.md")
UPDATE_ENV = "KG_UPDATE_DOC_EXAMPLES"
UPDATE_COMMAND = f"{UPDATE_ENV}=1 .venv/bin/pytest tests/readme/test_doc_examples.py"

# the fence may be longer than three backticks, for an example that holds a fenced block;
# an illustrative block's "name" is why it is not run
_EXAMPLE = re.compile(r"^ *<!-- (?P<kind>example|run|illustrative): (?P<name>[^\n]+?) -->\n"
                      r"(?P<indent> *)(?P<fence>```+)"
                      r"(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)(?P=fence)$",
                      re.MULTILINE | re.DOTALL)


def sections(markdown: str) -> dict[str, str]:
    """Level-2 sections by heading text (each with its ### subsections)."""
    parts = re.split(r"^## +(.+?)\s*$", markdown, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


_SH_FENCE = re.compile(r"^(?P<indent> *)```sh\n", re.MULTILINE)


def shell_blocks(path: Path) -> list[int]:
    """The line (1-based) of every ``sh`` fence in a document, however indented."""
    text = path.read_text(encoding="utf-8")
    return [text.count("\n", 0, m.start()) + 1 for m in _SH_FENCE.finditer(text)]


@dataclass(frozen=True)
class Example:
    """A marked block of output in a document."""

    path: Path
    name: str
    line: int  # of the marker, 1-based
    body: str  # the block's text, indentation removed
    kind: str = "example"  # "example": output to compare; "run": commands to run;
    # "illustrative": commands not run (``name`` says why)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _dedent(body: str, indent: str) -> str:
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


def examples(paths: tuple[Path, ...] = USER_DOCS) -> list[Example]:
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in _EXAMPLE.finditer(text):
            found.append(Example(path, match["name"], text.count("\n", 0, match.start()) + 1,
                                 _dedent(match["body"], match["indent"]), match["kind"]))
    return found


def rewrite(example: Example, body: str) -> None:
    """Put ``body`` (the produced text) into the example's block, as indented as it was."""
    text = example.path.read_text(encoding="utf-8")
    for match in _EXAMPLE.finditer(text):
        if match["name"] == example.name and match["kind"] == "example":
            indent = match["indent"]
            lines = "".join(indent + line if line.strip() else line
                            for line in body.splitlines(keepends=True))
            text = text[:match.start("body")] + lines + text[match.end("body"):]
            example.path.write_text(text, encoding="utf-8")
            return
    raise LookupError(f"{example.where}: example {example.name!r} is gone")
