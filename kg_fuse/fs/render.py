"""What the files contain: result Markdown, ``.meta/threshold`` and ``.meta/query.toml``.

Pure functions of their inputs, so they are tested without a mount. Front matter is
written with JSON-style double-quoted strings, which stay valid YAML whatever a label
holds (quotes, colons, newlines, unicode).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import TYPE_CHECKING, Any

import tomli_w

from kg_fuse.client.models import ConceptDetail, ConceptHit, Evidence
from kg_fuse.fs.queries import SavedQuery, adjustment_to_toml, scope_of
from kg_fuse.fs.threshold import PRESET_OFFSETS, EffectiveThreshold, preset_value

if TYPE_CHECKING:
    from kg_fuse.fs.results import ResultSet

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


def concept_markdown(hit: ConceptHit, detail: ConceptDetail | None) -> bytes:
    """The body of ``<label>.concept.md``: front matter, description, evidence, relationships."""
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
    if detail is not None and detail.signature.strip():
        lines += ["```", _one_line(detail.signature), "```", ""]
    description = (detail.description if detail else "") or hit.description
    lines += [description.strip() or "_No description._", ""]
    if detail is None:
        lines += ["_Evidence and relationships could not be fetched._", ""]
        return ("\n".join(lines)).encode("utf-8", errors="replace")
    if detail.evidence:
        lines += ["## Evidence", ""]
        for ev in detail.evidence:
            where = (ev.filename or ev.document or "unknown source") + evidence_location(ev)
            if ev.filename and ev.document:
                where += f" ({ev.document})"
            lines += [_quote_block(ev.quote) or ">", f"> — {_one_line(where)}", ""]
    if detail.relationships:
        lines += ["## Relationships", ""]
        for rel in detail.relationships:
            confidence = f" ({rel.confidence:.2f})" if rel.confidence is not None else ""
            lines.append(f"- {rel.rel_type} → {_one_line(rel.to_label)}{confidence}")
        lines.append("")
    return ("\n".join(lines)).encode("utf-8", errors="replace")


def format_threshold(value: float) -> str:
    """The shortest text that reads back as exactly this value (so an unchanged save
    from an editor never alters it)."""
    return repr(float(value))


def _fmt(value: float | None) -> str:
    return "unknown (server not reached yet)" if value is None else format_threshold(value)


def _stored(query: SavedQuery) -> str:
    """The value line: 'inherit', a preset word, or the number."""
    if query.threshold is None:
        return "inherit"
    if isinstance(query.threshold, str):
        return query.threshold
    return format_threshold(query.threshold)


def _presets_line(server_default: float | None) -> str:
    values = ", ".join(
        f"{word} = {_fmt(preset_value(word, server_default))}"
        f" ({'+' if offset > 0 else '-'}{abs(offset):.2f})"
        for word, offset in PRESET_OFFSETS.items())
    return f"# Presets follow the server default: {values}; standard = inherit."


NOISE_WARNING = ("comprehensive is below the server default, i.e. below the calibrated "
                 "noise floor: results under the default may be noise")


def threshold_file(
    query: SavedQuery, effective: EffectiveThreshold, server_default: float | None
) -> bytes:
    """``.meta/threshold``: explanatory comments, then ``inherit``, a preset or the number.

    The server default appears only in comments, so saving the file unchanged from an
    editor keeps an inheriting query inheriting (and a preset a preset).
    """
    lines = [
        "# Minimum similarity (0..1) a concept needs to be listed in this query.",
        "# Write a number in [0, 1] to override it for this query only; write 'inherit'",
        "# (or 'default', or empty the file) to use the server's default; or write a",
        "# preset: exact, standard or comprehensive.",
        _presets_line(server_default),
        f"# Server default: {_fmt(server_default)}",
        f"# Effective threshold: {_fmt(effective.value)} ({effective.described})",
    ]
    if effective.may_list_noise:
        lines.append(f"# Warning: {NOISE_WARNING}.")
    adj = query.auto_adjusted
    if adj is not None:
        to = "inherit" if adj.to_value is None else format_threshold(adj.to_value)
        lines.append(
            f"# Auto-adjusted at creation: {_fmt(adj.from_value)} found nothing; the server "
            f"suggested {_fmt(adj.suggested)}, floored at the default "
            f"{_fmt(adj.server_default)} -> {to}"
        )
    lines.append(_stored(query))
    return ("\n".join(lines) + "\n").encode("utf-8")


def query_toml(
    query: SavedQuery, effective: EffectiveThreshold, server_default: float | None
) -> bytes:
    """``.meta/query.toml``: everything about the query, as valid TOML."""
    doc: dict[str, Any] = {
        "name": query.name,
        "query": query.text,
        "threshold": "inherit" if query.threshold is None else query.threshold,
        **({"preset": effective.preset} if effective.preset else {}),
        "threshold_source": effective.source.value,
        "created_at": query.created_at,
    }
    if effective.value is not None:
        doc["effective_threshold"] = effective.value
    if server_default is not None:
        doc["server_default_last_seen"] = server_default
    doc["auto_adjusted"] = query.auto_adjusted is not None
    doc["limit"] = query.effective_limit
    doc["exclude"] = list(query.exclude)
    doc["union"] = list(query.union)
    scope = scope_of(query.path)
    if scope is not None:
        doc["ontology"] = scope
    if query.parent_key is not None:
        doc["parent"] = query.parent_key
    if query.auto_adjusted is not None:
        doc["auto_adjustment"] = adjustment_to_toml(query.auto_adjusted)
    if query.links:
        doc["links"] = [{"name": k.name, "target": k.target, "ontology": k.ontology}
                        for k in query.links]
    return tomli_w.dumps(doc).encode("utf-8")




def _when(wall: float) -> str:
    return dt.datetime.fromtimestamp(wall, dt.UTC).replace(microsecond=0).isoformat()


def status_file(
    query: SavedQuery,
    effective: EffectiveThreshold,
    server_default: float | None,
    results: ResultSet | None,
    problem: str | None,
) -> bytes:
    """``.meta/status``: why the directory looks the way it does, as ``key: value`` lines."""
    lines = [
        f"query: {_one_line(query.text)}",
        f"effective threshold: {_fmt(effective.value)} ({effective.described})",
        f"server default: {_fmt(server_default)}",
    ]
    if effective.may_list_noise:
        lines.append(f"warning: {NOISE_WARNING}")
    if query.auto_adjusted is not None:
        adj = query.auto_adjusted
        to = "inherit" if adj.to_value is None else format_threshold(adj.to_value)
        lines.append(f"auto-adjusted: {format_threshold(adj.from_value)} -> {to}")
    lines.append(f"limit: {query.effective_limit}")
    if query.links:
        lines.append("linked ontologies: " + ", ".join(k.ontology for k in query.links))
    if results is None:
        lines.append("results: not fetched")
    else:
        response = results.response
        stale = results.stale or problem is not None
        freshness = "stale: server unavailable" if stale else "fresh"
        lines += [
            f"results: {len(results.files)}",
            f"fetched: {_when(results.fetched_wall)} ({freshness})",
            f"threshold used by the server: {format_threshold(response.threshold_used)}",
        ]
        if response.below_threshold_count is not None:
            lines.append(f"below threshold: {response.below_threshold_count}")
        if response.suggested_threshold is not None:
            lines.append(f"suggested threshold: {format_threshold(response.suggested_threshold)}")
        if response.top_match is not None:
            top = response.top_match
            lines.append(f"best near miss: {_one_line(top.label)} ({top.score:.4f})")
        if not results.files and response.suggested_threshold is not None:
            lines.append(
                "hint: nothing reached the threshold; write "
                f"{format_threshold(response.suggested_threshold)} to .meta/threshold to see "
                "the near misses (below the server default they may be noise)"
            )
    if problem:
        lines.append(f"error: {_one_line(problem)}")
    return ("\n".join(lines) + "\n").encode("utf-8", errors="replace")
