"""What the ``.meta`` files show: ``threshold``, ``query.toml`` and ``status``.

Pure functions of the saved query, its ``ThresholdExplanation`` (every threshold that
filters its listing, and where each comes from) and its listing, so they are tested
without a mount. ``status`` is ``key: value`` lines; for a nested query or one with
union/exclude terms it shows one line per level and term, and a ``filtered by`` line
naming the level that removed the query's own matches and how many reach it (an empty
nested listing says which enclosing threshold emptied it). Where the listing stopped,
why an empty one is empty and how to see more are worded in ``listing_text``. A listing
fetched for earlier settings (they changed while the server could not be reached) is
shown as such: ``pending``, with no counts or suggestions read against the new ones.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import tomli_w

from kg_fuse.fs.queries.saved import SavedQuery, adjustment_to_toml, scope_of
from kg_fuse.fs.queries.why import summary_lines
from kg_fuse.fs.tree.meta.listing_text import (
    counted,
    cut_text,
    format_threshold,
    matches_text,
    more_text,
    one_line,
    scope_text,
)
from kg_fuse.listing.explain import (
    FilterLevel,
    Role,
    ThresholdExplanation,
    describe_default,
    describe_source,
)
from kg_fuse.listing.presets import PRESET_OFFSETS, preset_value
from kg_fuse.listing.thresholds import ThresholdSource

if TYPE_CHECKING:
    from kg_fuse.client.models import SearchResponse
    from kg_fuse.fs.queries.state import ResultSet
    from kg_fuse.listing.execute import LevelCount


def _fmt(value: float | None) -> str:
    return "unknown (server not reached yet)" if value is None else format_threshold(value)


def _stored(query: SavedQuery) -> str:
    """The value line: 'inherit', a preset word, or the number."""
    if query.threshold is None:
        return "inherit"
    if isinstance(query.threshold, str):
        return query.threshold
    return format_threshold(query.threshold)


def _presets_line(server_default: float | None, presets: dict[str, float] | None) -> str:
    values = ", ".join(
        f"{word} = {_fmt(preset_value(word, server_default, presets))}"
        + ("" if presets and word in presets else
           f" ({'+' if offset > 0 else '-'}{abs(offset):.2f})")
        for word, offset in PRESET_OFFSETS.items())
    origin = ("as the server derives them from its calibration" if presets
              else "by fixed offsets")
    return (f"# Presets follow the server default ({origin}): {values}; "
            "standard = inherit.")


NOISE_WARNING = ("comprehensive is below the server default, i.e. below the calibrated "
                 "noise floor: results under the default may be noise")


def _label(level: FilterLevel, index: int) -> str:
    """'level 1' / 'union "term"' / 'exclude "term"': a status line's key."""
    if level.role.is_term:
        return f"{level.role.name.lower()} {one_line(level.text)!r}"
    return f"level {index + 1}"


def _level_line(level: FilterLevel, explanation: ThresholdExplanation) -> str:
    """"0.55 (server default) for 'gzip', the enclosing query 'gzip'"."""
    head = (f"{_fmt(level.effective.value)} "
            f"({describe_source(level, explanation.default, origin=False)})")
    if level.role is Role.ENCLOSING:
        return f"{head} for {one_line(level.text)!r}, the enclosing query {level.owner!r}"
    if level.role is Role.OWN:
        return f"{head} for {one_line(level.text)!r}, this query"
    return f"{head}, this query's threshold"


def level_lines(explanation: ThresholdExplanation,
                counts: tuple[LevelCount, ...] = ()) -> list[tuple[str, str]]:
    """One (key, text) per level and term, with what each did to the last listing."""
    out = []
    for index, level in enumerate(explanation.levels):
        text = _level_line(level, explanation)
        if len(counts) == len(explanation.levels):
            count = counts[index]
            text += f"; {matches_text(count)}"
            if level.role is Role.ENCLOSING:
                text += f", {count.changed} of this query's matches not among them"
            elif level.role is Role.UNION:
                text += f", {count.changed} added"
            elif level.role is Role.EXCLUDE:
                text += f", {count.changed} removed"
        out.append((_label(level, index), text))
    return out


def filtered_by(explanation: ThresholdExplanation, counts: tuple[LevelCount, ...]
                ) -> str | None:
    """Which threshold emptied or thinned the listing: the enclosing level that removed
    the most of the query's own matches, or the query's own threshold."""
    chain = explanation.chain
    if len(counts) != len(explanation.levels):
        return None
    own_count = counts[len(chain) - 1]
    if own_count.matches == 0 and own_count.outside:
        return (f"the scope: {scope_text(own_count)}; the threshold is not what "
                "emptied it")
    if own_count.matches == 0:
        own = explanation.own
        return (f"this query's threshold {_fmt(own.effective.value)} "
                f"({own.effective.described}): no concept matches "
                f"{one_line(own.text)!r} at it")
    worst = max(range(len(chain) - 1), key=lambda i: counts[i].changed, default=None)
    if worst is None or counts[worst].changed == 0:
        return None
    level = chain[worst]
    # ``changed`` counts the query's matches the level removed: the rest reach it
    reach = own_count.matches - counts[worst].changed
    return (f"level {worst + 1}, the enclosing query {level.owner!r} at "
            f"{_fmt(level.effective.value)} ({level.effective.described}): "
            f"{reach or 'none'} of this query's {own_count.matches} matches reach it")


def threshold_file(query: SavedQuery, explanation: ThresholdExplanation) -> bytes:
    """``.meta/threshold``: explanatory comments, then ``inherit``, a preset or the number.

    The server default appears only in comments, so saving the file unchanged from an
    editor keeps an inheriting query inheriting (and a preset a preset).
    """
    effective, default = explanation.own.effective, explanation.default.value
    lines = [
        "# Minimum similarity (0..1) a concept needs to be listed in this query.",
        "# Write a number in [0, 1] to override it for this query only; write 'inherit'",
        "# (or 'default', or empty the file) to use the server's default; or write a",
        "# preset: exact, standard or comprehensive.",
        _presets_line(default, explanation.default.presets),
        f"# Server default: {_fmt(default)}",
        f"# Effective threshold: {_fmt(effective.value)} ({effective.described})",
    ]
    for level in explanation.chain[:-1]:
        lines.append(f"# Also filtered by the enclosing query {level.owner!r}: "
                     f"{_fmt(level.effective.value)} ({level.effective.described})")
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


def _level_toml(level: FilterLevel, explanation: ThresholdExplanation) -> dict[str, Any]:
    doc: dict[str, Any] = {"role": level.role.value, "query": level.text,
                           "owner": level.owner, "source": level.effective.source.value}
    if level.effective.value is not None:
        doc["threshold"] = level.effective.value
    if level.effective.preset:
        doc["preset"] = level.effective.preset
    doc["explained"] = describe_source(level, explanation.default)
    return doc


def query_toml(query: SavedQuery, explanation: ThresholdExplanation) -> bytes:
    """``.meta/query.toml``: everything about the query, as valid TOML; ``levels`` lists
    every threshold that filters its listing (enclosing queries first, then itself, then
    union and exclude terms)."""
    effective = explanation.own.effective
    doc: dict[str, Any] = {
        "name": query.name,
        "query": query.text,
        "threshold": "inherit" if query.threshold is None else query.threshold,
        **({"preset": effective.preset} if effective.preset else {}),
        "threshold_source": effective.source.value,
        "created_at": query.created_at,
        **_values_toml(explanation),
        "auto_adjusted": query.auto_adjusted is not None,
        "limit": query.effective_limit,
        "exclude": list(query.exclude),
        "union": list(query.union),
        **_where_toml(query),
        "levels": [_level_toml(level, explanation) for level in explanation.levels],
    }
    return tomli_w.dumps(doc).encode("utf-8")


def _values_toml(explanation: ThresholdExplanation) -> dict[str, Any]:
    """The effective threshold and the server default, where known."""
    effective, default = explanation.own.effective, explanation.default
    doc: dict[str, Any] = {}
    if effective.value is not None:
        doc["effective_threshold"] = effective.value
    if default.value is not None:
        doc["server_default_last_seen"] = default.value
        doc["server_default_learned"] = describe_default(default)
    return doc


def _where_toml(query: SavedQuery) -> dict[str, Any]:
    """Where the query sits and what it searches beyond its text: its ontology, its
    enclosing query, its auto-adjustment, its links (each only if it has one)."""
    doc: dict[str, Any] = {}
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
    return doc


def _when(wall: float) -> str:
    return dt.datetime.fromtimestamp(wall, dt.UTC).replace(microsecond=0).isoformat()


def status_file(query: SavedQuery, explanation: ThresholdExplanation,
                results: ResultSet | None, problem: str | None, pending: bool = False
                ) -> bytes:
    """``.meta/status``: why the directory looks the way it does, as ``key: value`` lines.

    ``pending``: ``results`` was fetched for earlier settings (the fetch for the current
    ones failed): it is described as such, never with the current thresholds' counts."""
    counts = results.levels if results is not None and not pending else ()
    lines = [*_threshold_lines(query, explanation),
             *_settings_lines(query, explanation, counts)]
    if results is None:
        lines.append("results: not fetched")
    else:
        if pending:
            lines.append(
                "pending: the settings changed while the server could not be reached; "
                "they apply once it answers, and until then the directory shows the last "
                "listing, fetched for the earlier settings (threshold "
                f"{format_threshold(results.response.threshold_used)}, limit "
                f"{results.plan.limit})")
        lines += _results_lines(results, None if pending else explanation,
                                stale=problem is not None or pending)
        lines += _server_lines(results)
    if problem:
        lines.append(f"error: {one_line(problem)}")
    return ("\n".join(lines) + "\n").encode("utf-8", errors="replace")


def _threshold_lines(query: SavedQuery, explanation: ThresholdExplanation) -> list[str]:
    """The query, its threshold and the server default; a warning, an auto-adjustment."""
    effective = explanation.own.effective
    lines = [
        f"query: {one_line(query.text)}",
        f"effective threshold: {_fmt(effective.value)} ({effective.described})",
        f"server default: {describe_default(explanation.default)}",
    ]
    if effective.may_list_noise:
        lines.append(f"warning: {NOISE_WARNING}")
    if query.auto_adjusted is not None:
        adj = query.auto_adjusted
        to = "inherit" if adj.to_value is None else format_threshold(adj.to_value)
        lines.append(f"auto-adjusted: {format_threshold(adj.from_value)} -> {to}")
    return lines


def _settings_lines(query: SavedQuery, explanation: ThresholdExplanation,
                    counts: tuple[LevelCount, ...]) -> list[str]:
    """Every level's and term's threshold (with what it did to the listing), the limit,
    the linked ontologies."""
    lines = []
    if len(explanation.levels) > 1:
        lines.append(f"thresholds: {counted(len(explanation.chain), 'level', 'levels')}; "
                     "a concept is listed "
                     "only when it reaches every level's threshold")
    lines += [f"{key}: {text}" for key, text in level_lines(explanation, counts)]
    lines.append(f"limit: {query.effective_limit}")
    if query.links:
        lines.append("linked ontologies: " + ", ".join(k.ontology for k in query.links))
    return lines


def _results_lines(results: ResultSet, explanation: ThresholdExplanation | None,
                   stale: bool) -> list[str]:
    """The listing's lines; ``explanation`` None: the listing is of earlier settings, so
    nothing is inferred from the current ones."""
    freshness = "stale: server unavailable" if results.stale or stale else "fresh"
    lines = [f"results: {len(results.files)}"]
    cut = cut_text(results)
    lines += [f"cut: {cut}"] if cut else []
    if explanation is not None:
        default, effective = explanation.default, explanation.own.effective
        # a preset or the default is offered the next preset down; a number, a number
        follows = effective.source in (ThresholdSource.PRESET, ThresholdSource.SERVER_DEFAULT)
        comprehensive = (preset_value("comprehensive", default.value, default.presets)
                         if follows else None)
        more = more_text(results, effective.value, comprehensive)
        lines += [f"more: {more}"] if more else []
    lines += [
        f"fetched: {_when(results.fetched_wall)} ({freshness})",
        f"threshold used by the server: {format_threshold(results.response.threshold_used)}",
    ]
    culprit = filtered_by(explanation, results.levels) if explanation is not None else None
    if culprit is not None:
        lines.append(f"filtered by: {culprit}")
    return lines


def _server_lines(results: ResultSet) -> list[str]:
    """What the server said beside the listing: what fell below the threshold, the
    threshold it suggests, how it read the query's words, and what to try."""
    response = results.response
    lines = []
    if response.below_threshold_count is not None:
        floor = "at least " if response.below_threshold_floor else ""
        lines.append(f"below threshold: {floor}{response.below_threshold_count}")
    suggested = response.suggestion  # the one the creation auto-adjust adopts
    if suggested is not None:
        lines.append(f"suggested threshold: {format_threshold(suggested)}")
    if response.near_misses:
        lines.append("near misses: " + one_line(", ".join(
            f"{label} ({score:.4f})" for label, score in response.near_misses)))
    elif response.top_match is not None:
        top = response.top_match
        lines.append(f"best near miss: {one_line(top.label)} ({top.score:.4f})")
    lines += _word_lines(response, empty=not results.files)
    lines += summary_lines(results.why)
    if not results.files and suggested is not None:
        what = ("the near misses above" if response.near_misses else "the near misses")
        lines.append(
            "hint: nothing reached the threshold; write "
            f"{format_threshold(suggested)} to .meta/threshold to see {what} "
            "(below the server default they may be noise)"
        )
    return lines


def _word_lines(response: SearchResponse, empty: bool) -> list[str]:
    """How the server read the query's words: expanded, repeated, unknown (``empty``:
    nothing was listed, so rephrasing is the hint)."""
    lines = []
    if response.expanded_words:
        lines.append("words read as: " + one_line("; ".join(
            f"{word} -> {', '.join(terms)}" for word, terms in response.expanded_words)))
    if response.repeated_words:
        lines.append("words said over and over: " + one_line(
            ", ".join(response.repeated_words)))
        lines.append("hint: a query that only repeats its words is read as noise; "
                     "write each word once to search for it")
    if response.unknown_words:
        lines.append("words the documents never use: " + one_line(
            ", ".join(response.unknown_words)))
        if empty:
            lines.append("hint: rephrase the query in words the documents use")
    return lines
