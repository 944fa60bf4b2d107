"""What a result file contains: Markdown with YAML front matter (``.meta`` files are
rendered in ``tree/meta/status.py``).

Pure functions of their inputs, so they are tested without a mount. Front matter is
written with JSON-style double-quoted strings, which stay valid YAML whatever a label
holds (quotes, colons, newlines, unicode).
"""

from __future__ import annotations

import json
import re

from kg_fuse.client.models import ConceptDetail, ConceptHit, Evidence

_YAML_UNSAFE = {0x85, 0x2028, 0x2029, 0xFEFF, 0xFFFE, 0xFFFF}


def yaml_string(text: str) -> str:
    """A double-quoted YAML scalar for any text."""
    out = []
    for ch in json.dumps(text, ensure_ascii=False):
        code = ord(ch)
        if code in _YAML_UNSAFE or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _quote_block(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in text.strip().splitlines())


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def evidence_location(ev: Evidence) -> str:
    """Where a quote sits: ``, section 8, paragraph 2``.

    ``paragraph`` in the API numbers the source *chunk* a quote comes from, and one chunk
    (a Markdown section, a docstring) may hold several paragraphs: calling that number
    "paragraph" gave two quotes from different paragraphs the same "paragraph 8". The
    chunk's own text tells which of its paragraphs holds the quote."""
    if ev.paragraph is None:
        return ""
    paragraphs = _paragraphs(ev.full_text)
    if len(paragraphs) <= 1:
        return f", section {ev.paragraph}"
    needle = " ".join(ev.quote.split())[:80]
    for number, paragraph in enumerate(paragraphs, start=1):
        if needle and needle in " ".join(paragraph.split()):
            return f", section {ev.paragraph}, paragraph {number}"
    return f", section {ev.paragraph}"


def concept_markdown(hit: ConceptHit, detail: ConceptDetail | None, why: str = "") -> bytes:
    """The body of ``<label>.concept.md``: front matter, why it is listed (on the first
    screen, under the title), description, evidence, relationships."""
    ontologies = detail.ontologies if detail and detail.ontologies else hit.ontologies
    lines = [
        "---",
        f"id: {yaml_string(hit.concept_id)}",
        f"label: {yaml_string(hit.label)}",
        f"score: {hit.score:.4f}",
        "ontologies: [" + ", ".join(yaml_string(o) for o in ontologies) + "]",
        "---",
        "",
        f"# {_one_line(hit.label)}",
        "",
    ]
    if why:
        lines += [why.rstrip("\n"), ""]
    if detail is not None and detail.signature.strip():
        lines += ["```", _one_line(detail.signature), "```", ""]
    description = (detail.description if detail else "") or hit.description
    lines += [description.strip() or "_No description._", ""]
    if detail is None:
        lines += ["_Evidence and relationships could not be fetched._", ""]
    else:
        lines += _evidence_lines(detail) + _relationship_lines(detail)
    return ("\n".join(lines)).encode("utf-8", errors="replace")


def _evidence_lines(detail: ConceptDetail) -> list[str]:
    """Each quote, and where it comes from."""
    if not detail.evidence:
        return []
    lines = ["## Evidence", ""]
    for ev in detail.evidence:
        where = (ev.filename or ev.document or "unknown source") + evidence_location(ev)
        if ev.filename and ev.document:
            where += f" ({ev.document})"
        lines += [_quote_block(ev.quote) or ">", f"> — {_one_line(where)}", ""]
    return lines


def _relationship_lines(detail: ConceptDetail) -> list[str]:
    if not detail.relationships:
        return []
    lines = ["## Relationships", ""]
    for rel in detail.relationships:
        confidence = f" ({rel.confidence:.2f})" if rel.confidence is not None else ""
        lines.append(f"- {rel.rel_type} → {_one_line(rel.to_label)}{confidence}")
    lines.append("")
    return lines
