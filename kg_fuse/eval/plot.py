"""``--plot FILE.png``: the two best-score distributions with the default marked.

matplotlib is an optional extra (``pip install 'kg-fuse[plot]'``); it is imported only
when a plot is asked for.
"""

from __future__ import annotations

from pathlib import Path

from kg_fuse.eval.report import summary
from kg_fuse.eval.runner import EvalRun


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
            "--plot needs matplotlib: pip install 'kg-fuse[plot]'") from exc
    fig, axes = plt.subplots(len(runs), 1, figsize=(8, 4.5 * len(runs)), squeeze=False)
    for run, ax in zip(runs, axes[:, 0], strict=True):
        _panel(run, ax)
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
