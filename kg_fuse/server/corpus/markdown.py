"""Markdown / plain-text documents: one concept per heading section.

Headings are found by :mod:`.headings` (Markdown, setext/reStructuredText, and the
capitals headings of manual pages and RFCs in plain text).

Used by ``--ingest DIR`` at start-up and by ``POST /ingest``, so a file gives the same
concepts whichever way it arrives. A section's label is its heading, its description
the first paragraph under it, its evidence every paragraph; a subsection is PART_OF
its enclosing section. Text before the first heading (or a file without headings) is a
section labelled with the document's title. The rest of a section after its first
paragraph is the concept's ``examples`` view.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath

from kg_fuse.server.corpus import (
    ChunkSpec,
    ConceptSpec,
    DocumentSpec,
    content_hash,
    one_line,
)
from kg_fuse.server.corpus.headings import (
    NAME_HEADING,
    find_headings,
    front_matter_end,
    generic_label,
    is_running_head,
)

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst", ".text"})

# A pattern's ``sub`` or ``split`` over a whole document is one call that holds the GIL
# (seconds for a 32 MiB upload, while searches and /health wait): these are applied a
# match at a time, in Python, so other threads run in between.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r]*\n")
_SOFT_HYPHENS = ("\u2010", "\u00ad")
#: a manual page's "cur‐ rent": the hyphen first, so a search skips to it quickly
_SOFT_HYPHEN_BREAK = re.compile(r"[\u2010\u00ad](?<=\w[\u2010\u00ad])\s+(?=\w)")


@dataclass
class _Section:
    level: int
    title: str
    start: int
    body_start: int
    end: int = 0


def _sections(text: str, title: str, suffix: str) -> list[_Section]:
    """The document's sections with character spans (see :mod:`.headings`)."""
    start = front_matter_end(text)
    sections: list[_Section] = [_Section(0, title, start, start)]
    for heading in find_headings(text, suffix):
        if heading.generic and heading.title == NAME_HEADING and len(sections) == 1:
            sections[0].body_start = heading.body_start  # a manual page's NAME line
            continue  # describes the document itself
        sections[-1].end = heading.start
        label = generic_label(title, heading.title) if heading.generic else heading.title
        sections.append(_Section(heading.level, label, heading.start, heading.body_start))
    sections[-1].end = len(text)
    return sections


def _split_paragraphs(text: str) -> Iterator[str]:
    start = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        yield text[start:match.start()]
        start = match.end()
    yield text[start:]


def _unbroken(paragraph: str) -> str:
    """Words a manual page broke at a hyphen joined again ("cur‐ rent": "current")."""
    if not any(hyphen in paragraph for hyphen in _SOFT_HYPHENS):
        return paragraph
    return _SOFT_HYPHEN_BREAK.sub(lambda _: "", paragraph)


def _paragraphs(text: str) -> list[str]:
    return [_unbroken(p.strip()) for p in _split_paragraphs(text)
            if p.strip() and not is_running_head(p)]


def parse_text_document(text: str, filename: str, ontology: str,
                        source_path: str | None = None,
                        source_type: str = "file") -> DocumentSpec:
    """Split one document into heading-section concepts with their evidence."""
    doc_hash = content_hash(text)
    title = PurePath(filename).stem or filename
    doc = DocumentSpec(name=filename, filename=filename, ontology=ontology, content=text,
                       source_type=source_type, source_path=source_path)
    stack: list[tuple[int, str]] = []  # (level, seed) of enclosing sections
    for index, section in enumerate(_sections(text, title, PurePath(filename).suffix)):
        body = text[section.body_start:section.end]
        paras = _paragraphs(body)
        while stack and stack[-1][0] >= section.level:
            stack.pop()
        seed = f"doc:{doc_hash}:{index}"
        if section.level == 0 and not paras:
            continue
        chunk = ChunkSpec(paragraph=len(doc.chunks), text=text[section.start:section.end],
                          start=section.start, end=section.end)
        doc.chunks.append(chunk)
        description = one_line(paras[0]) if paras else ""
        evidence = [(chunk.paragraph, p) for p in paras] or [(chunk.paragraph, section.title)]
        relations = [("PART_OF", stack[-1][1])] if stack else []
        examples = "\n\n".join(paras[1:])
        doc.concepts.append(ConceptSpec(seed=seed, label=section.title,
                                        description=description, evidence=evidence,
                                        relations=relations, examples=examples))
        stack.append((section.level, seed))
    return doc


def read_folder(folder: Path, ontology: str | None = None) -> list[DocumentSpec]:
    """Every Markdown/text file under ``folder`` as a document of one ontology."""
    folder = folder.resolve()
    name = ontology or folder.name
    docs: list[DocumentSpec] = []
    first_of: dict[str, str] = {}  # document id (its content) -> the file that had it
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix.lower() not in TEXT_SUFFIXES:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if not text.strip():
            log.warning("skipping %s: it is empty", path)
            continue
        rel = str(path.relative_to(folder))
        doc = parse_text_document(text, rel, name, source_path=str(path))
        if doc.id in first_of:  # a document is its content: the platform keeps one copy
            log.warning("skipping %s: the same content as %s", path, first_of[doc.id])
            continue
        first_of[doc.id] = rel
        docs.append(doc)
    log.info("read %d documents from %s into ontology %r", len(docs), folder, name)
    return docs
