"""Seeding the default search threshold just above this corpus's noise floor (ADR-508).

The floor is measured on the final score a search returns (fused vectors plus keyword,
word-form, WordNet and typo matches), with seeded noise of every shape a user might
type (:mod:`.noise`).

The statistic must not let one junk concept drag the default (a badly parsed concept
with an empty or garbled text sits near the centre of the embedding space and attracts
noise). For each concept, its highest score among the noise queries it is the best match
of is taken; the two concepts that attract noise most (one in a corpus of fewer than
1,000 concepts) are reported and left out. That is an extreme of a few hundred random
queries, so one sample's floor depends on the seed (over 20 seeds the stdlib default
ranged 0.23-0.42): the noise is drawn NOISE_ROUNDS times, from consecutive seeds, and
the floor is the median of the samples' floors:

    floor   = median over 16 samples of the 3rd-highest per-concept noise score
              (2nd below 1,000 concepts)
    default = ceil((floor + MARGIN) * 100) / 100,  MARGIN = 0.03

When no concept is an outlier the top three per-concept scores lie within a few
hundredths of each other and the margin covers them; when one is, it no longer moves
the default (it may then list for noise: the calibration output names it).

Without WordNet the reading of a query keeps almost all of the seeded noise at 0 (it
cannot tell an everyday word from a non-word), while nonsense around a word the corpus
uses, or a placeholder such as ``foo``, still scores: the floor measured falls (0.03 on
the manual pages) below the evaluation's own nonsense. The default is then held at
NO_WORDNET_FLOOR at least, and the report says it was calibrated without WordNet.

Relevant probes come from the corpus itself (seeded sample of concepts, each queried
by a phrasing made from its own description), so the report shows how many of them the
default keeps, whatever the corpus is about.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from kg_fuse.server.search import tuning
from kg_fuse.server.search.lexicon import wordnet
from kg_fuse.server.threshold.noise import (
    GIBBERISH_SEED,
    NOISE_SHAPES,
    gibberish_queries,
    not_naming,
)

log = logging.getLogger(__name__)

FALLBACK_THRESHOLD = tuning.FALLBACK_THRESHOLD.value
MARGIN = tuning.NOISE_MARGIN.value
NO_WORDNET_FLOOR = tuning.NO_WORDNET_FLOOR.value
OUTLIERS = tuning.NOISE_OUTLIERS.value  # left out of the floor ...
OUTLIER_CORPUS = tuning.OUTLIER_CORPUS.value  # ... in a corpus of this many concepts or more
SMALL_CORPUS_OUTLIERS = tuning.SMALL_CORPUS_OUTLIERS.value  # ... and below
ROUNDS = tuning.NOISE_ROUNDS.value
PROBE_COUNT = tuning.PROBE_COUNT.value
PROBE_MIN_WORDS, PROBE_MAX_WORDS = tuning.PROBE_WORDS.value
PROBE_DEPTH = tuning.PROBE_DEPTH.value
#: Recalibrate a calibrated default when the corpus grew or shrank by more than this.
RECALIBRATE_FRACTION = tuning.RECALIBRATE_FRACTION.value


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")

RULE = (f"default = ceil((median over {ROUNDS} noise samples of the "
        f"{_ordinal(OUTLIERS + 1)}-highest per-concept noise score, "
        f"{_ordinal(SMALL_CORPUS_OUTLIERS + 1)} below {OUTLIER_CORPUS:,} concepts, "
        f"+ {MARGIN}) * 100) / 100")

def probe_queries(concepts: Sequence[tuple[str, str, str]], count: int = PROBE_COUNT,
                  seed: int = GIBBERISH_SEED) -> list[tuple[str, str]]:
    """(concept id, phrasing) probes from this corpus's own descriptions.

    ``concepts`` are (id, label, description). A probe keeps the description's first
    words that are not in the label, so it asks for the concept without naming it.
    """
    rng = random.Random(seed)
    usable = []
    for cid, label, description in concepts:
        name_words = {w.lower() for w in re.split(r"[\W_]+", label) if w}
        words = [w for w in _WORD.findall(description) if w.lower() not in name_words]
        if len(words) >= PROBE_MIN_WORDS:
            usable.append((cid, " ".join(words[:PROBE_MAX_WORDS]).lower()))
    rng.shuffle(usable)
    return usable[:count]


def choose_default(floor: float, margin: float = MARGIN, with_wordnet: bool = True
                   ) -> float:
    """The rule; rounding first keeps 0.48 from becoming 0.49 through float noise.
    Without WordNet, never below NO_WORDNET_FLOOR."""
    chosen = min(1.0, math.ceil(round((floor + margin) * 100, 6)) / 100)
    return chosen if with_wordnet else max(chosen, NO_WORDNET_FLOOR)


def outliers_for(concept_count: int) -> int:
    """How many noise-attracting concepts to leave out of the floor. Two guard a large
    corpus against its junk concepts; in a small one few noise queries reach any concept
    at all (the reading of the query keeps most at 0), and leaving out two of a handful
    would drop the floor below nonsense it measured."""
    return OUTLIERS if concept_count >= OUTLIER_CORPUS else SMALL_CORPUS_OUTLIERS


def noise_floor(best: Sequence[Sequence[tuple[str, float]]], skip: int = OUTLIERS
                ) -> tuple[float, list[str], list[float]]:
    """(floor, outlier concept ids, per-query best scores).

    ``best`` holds each noise query's top matches, best first. Each concept's highest
    score among the noise queries it is the best match of is taken; the floor is the
    ``skip + 1``-th highest of those, so the ``skip`` concepts that attract noise most
    (typically a junk concept: an empty or garbled text near the centre of the
    embedding space) cannot set it.
    """
    per_concept: dict[str, float] = {}
    for hits in best:
        if hits:
            cid, score = hits[0]
            per_concept[cid] = max(score, per_concept.get(cid, -1.0))
    ranked = sorted(per_concept.items(), key=lambda kv: (-kv[1], kv[0]))
    outliers = [cid for cid, _ in ranked[:skip]] if len(ranked) > skip else []
    floor = ranked[len(outliers)][1] if ranked else 0.0
    scores = [hits[0][1] if hits else 0.0 for hits in best]
    return floor, outliers, scores


@dataclass
class CalibrationReport:
    """What a calibration measured and what it chose."""

    concept_count: int
    gibberish_count: int
    gibberish_median: float
    gibberish_max: float
    gibberish_worst_query: str
    noise_floor: float = 0.0
    #: each noise sample's floor, whose median is ``noise_floor`` (empty: one sample,
    #: calibrated before samples were drawn more than once)
    sample_floors: list[float] = field(default_factory=list)
    outliers: list[str] = field(default_factory=list)  # labels
    shapes: list[tuple[str, int, float, float]] = field(default_factory=list)
    probes: list[tuple[str, float, str]] = field(default_factory=list)  # query, max, label
    probes_found: int = 0
    rule: str = RULE
    default: float = FALLBACK_THRESHOLD
    calibrated_at: str = ""
    wordnet: bool | None = None  # None: calibrated before this was recorded
    rule_default: float | None = None  # what the rule gave, where the safe floor held it

    def to_json(self) -> str:
        return json.dumps(asdict(self))


Searcher = Callable[[list[str], int], list[list[tuple[str, float]]]]


@dataclass(frozen=True)
class NoiseMeasured:
    """What the noise queries scored: each sample's floor, the concepts that drew the
    most noise, and each query's best score (in the order of ``queries``)."""

    queries: list[tuple[str, str]]  # (shape, query), every sample's in turn
    floors: list[float]
    outliers: list[str]  # concept ids
    best: list[float]

    @property
    def median(self) -> float:
        return round(statistics.median(self.best), 4) if self.best else 0.0

    @property
    def highest(self) -> float:
        return round(max(self.best), 4) if self.best else 0.0

    @property
    def worst_query(self) -> str:
        """The query whose best score is the highest."""
        if not self.best:
            return ""
        return self.queries[max(range(len(self.best)), key=self.best.__getitem__)][1]


def measure_noise(search: Searcher, labels: Mapping[str, str], skip: int
                  ) -> NoiseMeasured:
    """ROUNDS samples of noise, from consecutive seeds, searched in one batch (the model
    runs once); each sample's floor (:func:`noise_floor`, leaving ``skip`` concepts
    out)."""
    samples = [not_naming(gibberish_queries(seed=GIBBERISH_SEED + i), labels.values())
               for i in range(ROUNDS)]
    noise = [pair for sample in samples for pair in sample]
    tops = search([q for _, q in noise], 5)
    floors, start = [], 0
    for sample in samples:
        floors.append(noise_floor(tops[start:start + len(sample)], skip)[0])
        start += len(sample)
    outliers, best = noise_floor(tops, skip)[1:]  # the concepts all samples draw most
    return NoiseMeasured(noise, floors, outliers, best)


def _shape_rows(noise: NoiseMeasured) -> list[tuple[str, int, float, float]]:
    """(shape, queries, median, max of their best scores), per noise shape."""
    rows = []
    for shape in NOISE_SHAPES:
        values = [b for (s, _), b in zip(noise.queries, noise.best, strict=True)
                  if s == shape]
        if values:
            rows.append((shape, len(values), round(statistics.median(values), 4),
                         round(max(values), 4)))
    return rows


def _probe_rows(search: Searcher, concepts: Sequence[tuple[str, str, str]],
                labels: Mapping[str, str], default: float
                ) -> tuple[list[tuple[str, float, str]], int]:
    """(query, its concept's score, label) per probe, and how many list their concept
    at ``default``."""
    probes = probe_queries(concepts)
    found = 0
    rows = []
    hits_of = search([q for _, q in probes], PROBE_DEPTH)
    for (cid, query), hits in zip(probes, hits_of, strict=True):
        score = next((s for c, s in hits if c == cid), 0.0)
        found += score >= default
        rows.append((query, round(score, 4), labels.get(cid, cid)))
    return rows, found


def measure(search: Searcher, concepts: Sequence[tuple[str, str, str]],
            calibrated_at: str = "", with_wordnet: bool | None = None) -> CalibrationReport:
    """Measure noise and probes through ``search`` (queries, k -> top-k per query).
    ``with_wordnet``: whether the search reads words through WordNet (default: whether
    this process found it)."""
    if with_wordnet is None:
        with_wordnet = wordnet().available
    labels = {cid: label for cid, label, _ in concepts}
    noise = measure_noise(search, labels, outliers_for(len(concepts)))
    floor = statistics.median(noise.floors)
    default = choose_default(floor, with_wordnet=with_wordnet)
    rule_default = choose_default(floor)
    if default != rule_default:
        log.warning("calibrated without WordNet: the noise floor %.3f gives %.2f, held "
                    "at the safe floor %.2f", floor, rule_default, default)
    probes, found = _probe_rows(search, concepts, labels, default)
    return CalibrationReport(
        concept_count=len(concepts), gibberish_count=len(noise.queries),
        gibberish_median=noise.median, gibberish_max=noise.highest,
        gibberish_worst_query=noise.worst_query,
        noise_floor=round(floor, 4), sample_floors=[round(f, 4) for f in noise.floors],
        outliers=[labels.get(h, h) for h in noise.outliers],
        shapes=_shape_rows(noise), probes=probes, probes_found=found, default=default,
        calibrated_at=calibrated_at, wordnet=with_wordnet,
        rule_default=rule_default if default != rule_default else None)


def drifted(calibrated_count: int, current_count: int,
            fraction: float = RECALIBRATE_FRACTION) -> bool:
    """Whether the corpus changed enough since calibration to calibrate again."""
    if calibrated_count <= 0:
        return current_count > 0
    return abs(current_count - calibrated_count) > fraction * calibrated_count


def rule_changed(report: object) -> bool:
    """Whether the stored calibration report was measured by another rule than this
    version's (an upgrade changed how the floor is measured): its default is then not the
    one this version would choose."""
    return isinstance(report, dict) and report.get("rule", RULE) != RULE


def lexicon_changed(calibrated_with_wordnet: bool | None) -> bool:
    """Whether WordNet was found or lost since the calibration: the noise it measured
    and the safe floor then no longer apply (unrecorded: calibrated with it, as the
    set-up installs it)."""
    return (calibrated_with_wordnet is not False) != wordnet().available


def format_report(report: CalibrationReport, model: str) -> str:
    """The calibration table, as plain text (pure: no model, no server), labelled with
    ``model``, the store's (it used to say all-MiniLM-L6-v2 whatever the model)."""
    lines = [
        f"Calibration over {report.concept_count} concepts ({model}, fused views "
        "+ keywords: the score searches return)",
        "",
        f"{'noise shape':<28} {'n':>4} {'median':>7} {'max':>7}",
    ]
    for shape, n, median, top in report.shapes:
        lines.append(f"{shape:<28} {n:>4} {median:>7.3f} {top:>7.3f}")
    lines += [
        f"{'all noise':<28} {report.gibberish_count:>4} {report.gibberish_median:>7.3f} "
        f"{report.gibberish_max:>7.3f}",
        f"  worst noise query: {report.gibberish_worst_query!r}",
        f"  concepts left out of the floor: {', '.join(report.outliers) or 'none'}",
        f"  noise floor: {report.noise_floor:.3f}" + (
            f" (median of {len(report.sample_floors)} samples' floors, "
            f"{min(report.sample_floors):.3f} to {max(report.sample_floors):.3f})"
            if len(report.sample_floors) > 1 else ""),
        "",
        f"{'relevant probe (from this corpus)':<52} {'score':>6}  expected concept",
    ]
    for query, score, label in report.probes[:12]:
        lines.append(f"{query[:52]:<52} {score:>6.3f}  {label}")
    if report.probes:
        lines.append(f"probes listing their concept at the default: {report.probes_found}/"
                     f"{len(report.probes)}")
    lines += ["", f"rule: {report.rule}", f"default: {report.default:.2f}"]
    if report.wordnet is False:
        held = ("" if report.rule_default is None else
                f": the rule gave {report.rule_default:.2f}, held at the safe floor")
        lines.append(f"calibrated without WordNet (default at least "
                     f"{NO_WORDNET_FLOOR:.2f}{held})")
    if report.calibrated_at:
        lines.append(f"calibrated at: {report.calibrated_at}")
    return "\n".join(lines)
