"""Summaries of an evaluation run: ADR-508's table as text, and the same as JSON.

Pure functions of an :class:`~kg_fuse.eval.runner.EvalRun`, so they are tested without
a server.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass

from kg_fuse.eval.runner import EvalRun, RelevantResult


@dataclass(frozen=True)
class Distribution:
    n: int
    median: float | None
    p90: float | None
    max: float | None
    min: float | None

    @classmethod
    def of(cls, values: list[float]) -> Distribution:
        if not values:
            return cls(0, None, None, None, None)
        ordered = sorted(values)
        return cls(len(ordered), round(statistics.median(ordered), 4),
                   round(percentile(ordered, 90), 4), round(ordered[-1], 4),
                   round(ordered[0], 4))


def percentile(ordered: list[float], pct: float) -> float:
    """Linear-interpolated percentile of sorted values (numpy's default rule)."""
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * pct / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def query_precision(r: RelevantResult) -> float | None:
    """The share of a query's listed (and judged) files judged relevant; None when it
    was not judged or listed nothing."""
    good = set(r.judged_relevant)
    listed = [label for label in r.listed_labels
              if label in good or label in r.judged_irrelevant]
    return sum(label in good for label in listed) / len(listed) if listed else None


def query_recall(r: RelevantResult) -> float | None:
    """The share of a query's files judged relevant that are listed; None when none
    was judged relevant."""
    good = set(r.judged_relevant)
    return sum(label in good for label in r.listed_labels) / len(good) if good else None


def _unjudged(r: RelevantResult) -> int:
    """How many of a query's listed files were never judged."""
    return sum(1 for label in r.listed_labels
               if label not in r.judged_relevant and label not in r.judged_irrelevant)


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def judged(run: EvalRun) -> dict | None:
    """Precision and recall of the listings against the set's judgments (None: the set
    has none): per query, the share of its listed files judged relevant, and the share
    of its files judged relevant that are listed; each the mean over the queries where
    it is defined (a listing with files; a query with a file judged relevant)."""
    rows = [r for r in run.relevant if r.judged_relevant or r.judged_irrelevant]
    if not rows:
        return None
    precisions = [p for r in rows if (p := query_precision(r)) is not None]
    recalls = [q for r in rows if (q := query_recall(r)) is not None]
    return {
        "queries": len(rows),
        "precision": _mean(precisions),
        "recall": _mean(recalls),
        "empty_listings": len(rows) - len(precisions),
        "unjudged_listed": sum(_unjudged(r) for r in rows),
    }


def _scores(run: EvalRun) -> dict:
    """The best scores' distributions, and how many relevant queries score above every
    gibberish one."""
    gib_best = [g.best_score for g in run.gibberish]
    rel_best = [r.best_score for r in run.relevant if r.best_score is not None]
    gib_max = max(gib_best) if gib_best else None
    separated = (sum(1 for s in rel_best if s > gib_max) if gib_max is not None
                 else len(rel_best))
    return {
        "gibberish": asdict(Distribution.of(gib_best)),
        "relevant": asdict(Distribution.of(rel_best)),
        "relevant_not_found": len(run.relevant) - len(rel_best),
        "relevant_above_gibberish_max": separated,
    }


def _listed(run: EvalRun) -> dict:
    """What a user sees at the default: gibberish that lists anything, relevant queries
    whose expected concept is listed."""
    gib_listing = [g for g in run.gibberish if g.listed]
    hits = [r for r in run.relevant if r.hit]
    return {
        "gibberish_listing_anything": len(gib_listing),
        "gibberish_listing_anything_pct": _pct(len(gib_listing), len(run.gibberish)),
        "relevant_listed": len(hits),
        "relevant_listed_pct": _pct(len(hits), len(run.relevant)),
    }


def summary(run: EvalRun) -> dict:
    """The headline figures: distributions and the counts at the default."""
    defaults = sorted({r.threshold_used for r in [*run.gibberish, *run.relevant]})
    return {
        "default_threshold": defaults[0] if len(defaults) == 1 else defaults,
        "listing_limit": run.listing_limit,
        **_scores(run),
        **_listed(run),
        "cut": run.cut,
        "listing_size": asdict(Distribution.of([float(r.listed) for r in run.relevant])),
        "judged": judged(run),
    }


def _as_dict(run: EvalRun) -> dict:
    return {
        "set": run.qset.name,
        "api_url": run.api_url,
        "summary": summary(run),
        "gibberish": [asdict(g) for g in run.gibberish],
        "relevant": [dict(asdict(r), hit=r.hit) for r in run.relevant],
    }


def to_json(run: EvalRun) -> str:
    """Everything, per query, for diffing one run against another."""
    return json.dumps(_as_dict(run), indent=2, ensure_ascii=False)


def many_to_json(runs: list[EvalRun]) -> str:
    """Several sets' runs: ``{"sets": [one set's JSON, ...]}``."""
    return json.dumps({"sets": [_as_dict(run) for run in runs]}, indent=2,
                      ensure_ascii=False)


def format_table(runs: list[EvalRun]) -> str:
    """One line per set: the default, gibberish listing anything, relevant listed."""
    lines = [f"{'set':<28} {'default':>8} {'gibberish listing':>18} {'relevant listed':>20}"
             f" {'size p50/p90':>13} {'precision':>9} {'recall':>7}"]
    for run in runs:
        s = summary(run)
        default = s["default_threshold"]
        default_text = f"{default:.2f}" if isinstance(default, float) else "varied"
        size, judgments = s["listing_size"], s["judged"] or {}
        lines.append(
            f"{_short(run.qset.name, 28):<28} {default_text:>8} "
            f"{s['gibberish_listing_anything']:>8}/{len(run.gibberish):<9} "
            f"{s['relevant_listed']:>6}/{len(run.relevant):<4} ({s['relevant_listed_pct']:5.1f}%)"
            f" {_n(size['median']):>6}/{_n(size['p90']):<6} "
            f"{_n(judgments.get('precision'), 2):>9} {_n(judgments.get('recall'), 2):>7}")
    return "\n".join(lines)


def _n(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _f(value: float | None, width: int = 7) -> str:
    return f"{value:>{width}.3f}" if value is not None else f"{'-':>{width}}"


def _row(name: str, dist: dict) -> str:
    return (f"{name:<30} {dist['n']:>4} {_f(dist['median'])} {_f(dist['p90'])} "
            f"{_f(dist['max'])} {_f(dist['min'])}")


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _miss_line(r: RelevantResult) -> str:
    where = (f"{r.best_label} {r.best_score:.3f} rank {r.rank}" if r.best_score is not None
             else f"none of {', '.join(r.expect)} in the top results")
    return (f"  {_short(repr(r.text), 44):<44} {where}; "
            f"top {r.top_label} {r.top_score:.3f}")


def format_text(run: EvalRun) -> str:
    """ADR-508 style: distributions, then what a user sees at the default."""
    s = summary(run)
    default = s["default_threshold"]
    default_text = (f"{default:.2f}" if isinstance(default, float)
                    else "varied: " + ", ".join(f"{d:.2f}" for d in default))
    lines = [
        f"kg-fuse eval: set {run.qset.name!r} ({len(run.relevant)} relevant, "
        f"{len(run.gibberish)} gibberish queries) against {run.api_url}",
        f"default threshold {default_text} (min_similarity omitted), "
        f"listing limit {run.listing_limit}",
        "",
        f"{'best score':<30} {'n':>4} {'median':>7} {'p90':>7} {'max':>7} {'min':>7}",
        _row("gibberish (top match)", s["gibberish"]),
        _row("relevant (best expected)", s["relevant"]),
    ]
    if s["relevant_not_found"]:
        lines.append(f"  ({s['relevant_not_found']} relevant queries had no expected concept "
                     "in the ranked results at all)")
    lines += [
        f"relevant above the gibberish max: {s['relevant_above_gibberish_max']}"
        f"/{len(run.relevant)}",
        "",
        f"At the default ({default_text}):",
        *_at_the_default(run, s),
        *_miss_lines(run),
    ]
    return "\n".join(lines)


def _at_the_default(run: EvalRun, s: dict) -> list[str]:
    """Gibberish that lists anything (each query), relevant queries listed, the listings'
    sizes, and the judgments' precision and recall."""
    lines = [f"  gibberish queries that list anything: {s['gibberish_listing_anything']}"
             f"/{len(run.gibberish)} ({s['gibberish_listing_anything_pct']}%)"]
    for g in sorted((g for g in run.gibberish if g.listed), key=lambda g: -g.best_score):
        lines.append(f"    {_short(repr(g.text), 44):<44} lists {g.listed}; "
                     f"top {g.best_label} {g.best_score:.3f}")
    lines.append(f"  relevant queries whose expected concept is listed: {s['relevant_listed']}"
                 f"/{len(run.relevant)} ({s['relevant_listed_pct']}%)")
    size = s["listing_size"]
    how = ("stopped by the relevance cut" if run.cut
           else "everything above the default (--no-cut)")
    lines.append(f"  listing size of the relevant queries: median {_n(size['median'])}, "
                 f"p90 {_n(size['p90'])}, max {_n(size['max'])} ({how})")
    judgments = s["judged"]
    if judgments is not None:
        lines.append(
            f"  against the judgments ({judgments['queries']} queries judged file by file): "
            f"precision {_n(judgments['precision'], 3)}, recall {_n(judgments['recall'], 3)}"
            f"; {judgments['empty_listings']} empty listings"
            + (f", {judgments['unjudged_listed']} listed files never judged"
               if judgments["unjudged_listed"] else ""))
    return lines


def _miss_lines(run: EvalRun) -> list[str]:
    """The relevant queries whose expected concept is not listed, best scored first."""
    misses = [r for r in run.relevant if not r.hit]
    if not misses:
        return []
    misses.sort(key=lambda r: -(r.best_score or 0.0))
    return ["", f"Misses ({len(misses)}): query, best expected concept with its score "
                "and rank, and the top result", *(_miss_line(r) for r in misses)]
