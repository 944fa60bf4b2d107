"""Intensity presets (exact / comprehensive), derived from the calibration.

ChromaDB's presets are fixed numbers (0.7 / 0.5 / 0.3): the split-brain ADR-508 removed.
Here they are published by the server next to the default, computed from what the last
calibration measured on this corpus, and always relative to the current default, so they
follow it when an administrator sets it or the corpus is recalibrated:

    exact         = default + (median relevant-probe score - default) / 2,
                    at least default + 0.05, at most 0.99
    comprehensive = default - (default - noise median) / 2,
                    within [default - 0.10, default - 0.02]

The default is the line between noise and relevant matches. ``exact`` moves halfway from
it towards a typical relevant match of this corpus (the calibration's probes ask for a
concept with words of its own description, so their median is an upper reference; the
full median would keep only the very closest matches). ``comprehensive`` moves halfway
down towards where a typical nonsense query's best match lands (the noise median: half
of all noise would list something there), never more than 0.10: below the default, the
calibrated noise floor, its extra results may be noise.

Without a calibration report (a store never calibrated), the fixed offsets the client
falls back on apply: +0.10 and -0.06.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from kg_fuse.server.search import tuning

EXACT_STEP = tuning.EXACT_STEP.value
EXACT_CAP = tuning.EXACT_CAP.value
COMPREHENSIVE_STEP = tuning.COMPREHENSIVE_STEP.value
COMPREHENSIVE_MAX_DROP = tuning.COMPREHENSIVE_MAX_DROP.value
FALLBACK_OFFSETS: dict[str, float] = tuning.FALLBACK_OFFSETS.value
RULE = (f"exact = default + (median relevant-probe score - default) / 2 within "
        f"[default + {EXACT_STEP:.2f}, {EXACT_CAP:.2f}]; comprehensive = default - "
        f"(default - noise median) / 2 within [default - {COMPREHENSIVE_MAX_DROP:.2f}, "
        f"default - {COMPREHENSIVE_STEP:.2f}]")


def _up(value: float) -> float:
    return math.ceil(round(value * 100, 6)) / 100


def _down(value: float) -> float:
    return math.floor(round(value * 100, 6)) / 100


def derive(default: float, report: Mapping | None) -> dict[str, float]:
    """The preset values for ``default`` given the stored calibration ``report``;
    ``standard`` is the default itself, so any search tells a client the default."""
    probes = report.get("probes") if isinstance(report, Mapping) else None
    scores = sorted(float(p[1]) for p in probes or ()
                    if isinstance(p, list | tuple) and len(p) > 1 and float(p[1]) > 0)
    if not scores:
        return {"standard": default,
                **{word: round(min(1.0, max(0.0, default + offset)), 2)
                   for word, offset in FALLBACK_OFFSETS.items()}}
    median = statistics.median(scores)
    exact = min(EXACT_CAP, max(_up(default + EXACT_STEP), _up((default + median) / 2)))
    noise_median = float(report.get("gibberish_median") or 0.0)
    comprehensive = min(default - COMPREHENSIVE_STEP,
                        max(default - COMPREHENSIVE_MAX_DROP, (default + noise_median) / 2))
    return {"exact": max(exact, round(default, 2)), "standard": default,
            "comprehensive": max(0.0, _down(comprehensive))}
