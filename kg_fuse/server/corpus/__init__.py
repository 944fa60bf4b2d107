"""Corpus builders produce plain specs; the builder module turns them into store rows.

Keeping the parsers free of storage and embedding concerns lets the same Markdown
splitter serve both ``--ingest DIR`` at start-up and the ``POST /ingest`` endpoint.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

_NON_SPACE = re.compile(r"\S+")


def one_line(text: str) -> str:
    """The text with each run of whitespace made one space, and none at either end.

    A match at a time, in Python: one ``sub`` over a 32 MiB upload holds the GIL for
    seconds, while searches and /health wait; this lets other threads run in between.
    """
    return " ".join(match.group() for match in _NON_SPACE.finditer(text))


def content_hash(text: str) -> str:
    """Document ids are the content hash, as on the platform."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def copy_id(content: str, ontology: str) -> str:
    """The id of a document whose content another ontology already holds.

    Duplicates are per ontology, as on the platform: the same file copied into a second
    ontology is a second document there, under an id of its own that the same copy
    always gets again.
    """
    return content_hash(f"{ontology}\x00{content}")


def concept_id(seed: str) -> str:
    """Stable concept ids, so rebuilding the same corpus gives the same ids."""
    return "c_" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:20]


@dataclass
class ChunkSpec:
    """One stretch of the original document that evidence quotes from."""

    paragraph: int
    text: str
    start: int
    end: int


@dataclass
class ConceptSpec:
    """A concept with its evidence; ``seed`` is what its id is derived from.

    The three views a concept is read by: ``signature`` (how it is called, e.g.
    ``sqrt(x, /)``; empty for prose), ``description`` (the first paragraph) and
    ``examples`` (doctest examples or the paragraphs after the first; for Markdown the
    rest of the section).
    """

    seed: str
    label: str
    description: str
    evidence: list[tuple[int, str]] = field(default_factory=list)  # (chunk paragraph, quote)
    relations: list[tuple[str, str]] = field(default_factory=list)  # (rel_type, target seed)
    signature: str = ""
    examples: str = ""

    @property
    def id(self) -> str:
        return concept_id(self.seed)

    def embedding_text(self) -> str:
        return embedding_text(self.label, self.description)


def embedding_text(label: str, description: str) -> str:
    """What gets embedded for a concept: its label plus its description."""
    return f"{label}: {description}" if description else label


@dataclass
class DocumentSpec:
    """A source document and everything extracted from it."""

    name: str
    filename: str
    ontology: str
    content: str
    chunks: list[ChunkSpec] = field(default_factory=list)
    concepts: list[ConceptSpec] = field(default_factory=list)
    source_type: str = "file"
    source_path: str | None = None

    @property
    def id(self) -> str:
        return content_hash(self.content)
