"""``--plot FILE.png``: per set, the two best-score distributions with the default
marked, and each query's listing size against its precision (the share of its listed
files judged relevant, for sets judged by hand; else the listing sizes alone).

matplotlib is an optional extra (the ``plot`` extra); it is imported only
when a plot is asked for.
"""

from __future__ import annotations

from pathlib import Path

from kg_fuse.eval.report import query_precision, summary
from kg_fuse.eval.runner import EvalRun
from kg_fuse.exits import install_hint


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def plot(runs: list[EvalRun], path: Path) -> None:
    """Overlaid histograms of gibberish and relevant best scores, default as a line: one
    panel per set."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable(
            f"--plot needs matplotlib: {install_hint('plot')}") from exc
    fig, axes = plt.subplots(len(runs), 2, figsize=(14, 4.5 * len(runs)), squeeze=False)
    for run, (scores, sizes) in zip(runs, axes, strict=True):
        _panel(run, scores)
        _sizes(run, sizes)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _panel(run: EvalRun, ax) -> None:  # noqa: ANN001 - a matplotlib Axes
    s = summary(run)
    gib = [g.best_score for g in run.gibberish]
    rel = [r.best_score for r in run.relevant if r.best_score is not None]
    bins = [i / 50 for i in range(51)]
    ax.hist(gib, bins=bins, alpha=0.6, label=f"gibberish, top match (n={len(gib)})",
            color="tab:red")
    ax.hist(rel, bins=bins, alpha=0.6, label=f"relevant, best expected (n={len(rel)})",
            color="tab:blue")
    defaults = s["default_threshold"]
    for value in defaults if isinstance(defaults, list) else [defaults]:
        ax.axvline(value, color="black", linestyle="--",
                   label=f"default {value:.2f}: {s['relevant_listed_pct']}% relevant listed, "
                         f"{s['gibberish_listing_anything']} gibberish listing")
    ax.set_xlabel("similarity score")
    ax.set_ylabel("queries")
    ax.set_xlim(0, 1)
    ax.set_title(f"kg-fuse eval: {run.qset.name}")
    ax.legend(loc="upper left", fontsize="small")


def _sizes(run: EvalRun, ax) -> None:  # noqa: ANN001 - a matplotlib Axes
    """Listing size against judged precision, one point per query (judged sets), or
    the listing sizes' histogram."""
    s = summary(run)
    judged = [(r.listed, precision) for r in run.relevant
              if (precision := query_precision(r)) is not None]
    how = "cut" if run.cut else "no cut"
    if judged:
        ax.scatter([n for n, _ in judged], [p for _, p in judged], alpha=0.6,
                   color="tab:green", label=f"queries judged by hand (n={len(judged)})")
        j = s["judged"]
        ax.axhline(j["precision"], color="black", linestyle="--",
                   label=f"mean precision {j['precision']:.2f}, recall {j['recall']:.2f}")
        ax.set_ylabel("precision (listed files judged relevant)")
        ax.set_ylim(-0.05, 1.05)
    else:
        ax.hist([r.listed for r in run.relevant], bins=range(0, run.listing_limit + 2),
                color="tab:green", alpha=0.6, label="relevant queries")
        ax.set_ylabel("queries")
    ax.set_xlabel(f"listing size ({how}; median {s['listing_size']['median']})")
    ax.set_title(f"{run.qset.name}: listing size")
    ax.legend(loc="lower right", fontsize="small")
