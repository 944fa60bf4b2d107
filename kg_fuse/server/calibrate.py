"""Seeding the default search threshold just above this corpus's noise floor (ADR-508).

The floor is measured, not assumed: a fixed, seeded set of random-letter queries (plus
a few keyboard mashes) is embedded, and each one's best cosine against the corpus is
its noise score. The default is put just above the worst noise score:

    default = ceil((max gibberish best-match + MARGIN) * 100) / 100,  MARGIN = 0.02

so no gibberish query of the calibration set lists anything at the default. Relevant
probe queries are measured too, for the report only.
"""

from __future__ import annotations

import json
import logging
import math
import random
import statistics
from dataclasses import asdict, dataclass, field

from kg_fuse.server.embedder import Embedder
from kg_fuse.server.index import ConceptIndex

log = logging.getLogger(__name__)

THRESHOLD_KEY = "search_default_similarity_threshold"
CALIBRATION_KEY = "search_calibration_report"
FALLBACK_THRESHOLD = 0.6
MARGIN = 0.02
GIBBERISH_COUNT = 50
GIBBERISH_SEED = 508
RULE = "default = ceil((max gibberish best-match + 0.02) * 100) / 100"

KEYBOARD_MASHES: tuple[str, ...] = (
    "asdfgh qwerty zxcvb", "qwertyuiop", "zxcv bnm", "asdf jkl", "hjkl yuiop ghjk",
)

PROBE_QUERIES: tuple[str, ...] = (
    "compress data with gzip",
    "read and write CSV files",
    "encode binary data as base64",
    "copy a directory tree",
    "decode JSON text into Python objects",
    "create a temporary file",
    "match file names against shell wildcards",
    "extract files from a zip archive",
)


def gibberish_queries(count: int = GIBBERISH_COUNT, seed: int = GIBBERISH_SEED) -> list[str]:
    """``count`` seeded queries of 2-4 'words' of 3-8 random letters, plus the mashes."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    queries = [
        " ".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 8)))
                 for _ in range(rng.randint(2, 4)))
        for _ in range(count)
    ]
    return queries + list(KEYBOARD_MASHES)


def choose_default(gibberish_max: float, margin: float = MARGIN) -> float:
    """The rule; rounding first keeps 0.48 from becoming 0.49 through float noise."""
    return math.ceil(round((gibberish_max + margin) * 100, 6)) / 100


@dataclass
class CalibrationReport:
    """What a calibration measured and what it chose."""

    concept_count: int
    gibberish_count: int
    gibberish_median: float
    gibberish_max: float
    gibberish_worst_query: str
    probes: list[tuple[str, float, str]] = field(default_factory=list)  # query, max, label
    rule: str = RULE
    default: float = FALLBACK_THRESHOLD

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def measure(embedder: Embedder, index: ConceptIndex,
            labels: dict[str, str] | None = None) -> CalibrationReport:
    """Embed the calibration queries and measure them against the index (blocking)."""
    noise = gibberish_queries()
    noise_best = index.best_scores(embedder.encode(noise))
    probes: list[tuple[str, float, str]] = []
    for query, vector in zip(PROBE_QUERIES, embedder.encode(list(PROBE_QUERIES)), strict=True):
        top = index.search(vector, -1.0, top_k=1)
        cid, score = top[0] if top else ("", 0.0)
        probes.append((query, round(score, 4), (labels or {}).get(cid, cid)))
    worst = int(noise_best.argmax()) if len(noise_best) else 0
    gib_max = float(noise_best.max()) if len(noise_best) else 0.0
    return CalibrationReport(
        concept_count=len(index),
        gibberish_count=len(noise),
        gibberish_median=round(float(statistics.median(noise_best.tolist())), 4)
        if len(noise_best) else 0.0,
        gibberish_max=round(gib_max, 4),
        gibberish_worst_query=noise[worst],
        probes=probes,
        default=choose_default(gib_max),
    )


def format_report(report: CalibrationReport) -> str:
    """The calibration table, as plain text (pure: no model, no server)."""
    lines = [
        f"Calibration over {report.concept_count} concepts (all-MiniLM-L6-v2, exact cosine)",
        "",
        f"{'queries':<44} {'n':>3} {'median':>7} {'max':>7}",
        f"{'gibberish (seeded random letters + mashes)':<44} {report.gibberish_count:>3} "
        f"{report.gibberish_median:>7.3f} {report.gibberish_max:>7.3f}",
        f"  worst gibberish query: {report.gibberish_worst_query!r}",
        "",
        f"{'relevant probe':<44} {'max':>7}  top match",
    ]
    for query, score, label in report.probes:
        lines.append(f"{query:<44} {score:>7.3f}  {label}")
    if report.probes:
        scores = [s for _, s, _ in report.probes]
        lines.append(f"{'(probe range)':<44} {min(scores):.3f}-{max(scores):.3f}")
    lines += ["", f"rule: {report.rule}", f"default: {report.default:.2f}"]
    return "\n".join(lines)
