"""The default search threshold (ADR-508): the value a search inherits, where it came from
(calibrated, an administrator's, the fallback), its presets, and calibration.

A calibrated default is measured again once the corpus has changed by more than
:data:`~kg_fuse.server.threshold.calibrate.RECALIBRATE_FRACTION`; an administrator's
value is never touched.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from kg_fuse.server.search.searcher import Searcher
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store
from kg_fuse.server.threshold import calibrate, presets
from kg_fuse.server.threshold.keys import CALIBRATION_KEY, PROVENANCE_KEY, THRESHOLD_KEY

log = logging.getLogger(__name__)

#: Whose threshold a search ran at: "request", it named one; "default", it inherited it.
ThresholdSource = Literal["request", "default"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class DefaultReport:
    """The default as an administrator reads it: its value and where it came from."""

    key: str
    threshold: float | None  # None: unset, the fallback applies
    fallback: float
    source: str  # calibrated, administrator or fallback
    concept_count: int | None
    calibrated_at: str | None
    noise_floor: float | None
    set_by: str | None
    set_at: str | None
    recalibrates_after_change: float | None  # only a calibrated default is recalibrated
    presets: dict[str, float]
    preset_rule: str


class DefaultThreshold:
    """The default threshold's settings, over the store, measured with the searcher."""

    def __init__(self, store: Store, searcher: Searcher) -> None:
        self.store = store
        self.searcher = searcher
        self._presets: tuple[float, str | None, dict[str, float]] | None = None

    def stored(self) -> float | None:
        """The configured default, or None when unset or unreadable."""
        try:
            raw = self.store.get_setting(THRESHOLD_KEY)
            value = None if raw is None else float(raw)
        except (ValueError, TypeError):
            log.warning("unreadable %s setting; using the fallback", THRESHOLD_KEY)
            return None
        if value is None or not 0.0 <= value <= 1.0:
            return None
        return value

    def default(self) -> float:
        """The threshold a search that names none inherits."""
        stored = self.stored()
        return calibrate.FALLBACK_THRESHOLD if stored is None else stored

    def for_search(self, requested: float | None) -> tuple[float, ThresholdSource]:
        """The threshold a search runs at, and whose it is: the one the request named
        (it overrides the default for that search alone), else the default it inherits."""
        if requested is None:
            return self.default(), "default"
        return requested, "request"

    def set(self, value: float, provenance: dict | None = None) -> None:
        """Store the default; without ``provenance`` it is an administrator's value."""
        prov = provenance or {"source": "administrator", "set_by": None, "set_at": _now()}
        self.store.set_settings({THRESHOLD_KEY: repr(float(value)),
                                 PROVENANCE_KEY: json.dumps(prov)})

    def set_by_administrator(self, value: float, client_id: str) -> None:
        """An administrator's default: kept until another is set, never recalibrated."""
        self.set(value, provenance={"source": "administrator", "set_by": client_id,
                                    "set_at": _now()})
        log.info("%s set %s to %s", client_id, THRESHOLD_KEY, value)

    def presets(self) -> dict[str, float]:
        """The intensity presets for the current default, from the last calibration."""
        default = self.default()
        raw = self.store.get_setting(CALIBRATION_KEY)
        if self._presets is None or self._presets[:2] != (default, raw):
            try:
                report = None if raw is None else json.loads(raw)
            except ValueError:
                report = None
            self._presets = (default, raw, presets.derive(default, report))
        return dict(self._presets[2])

    def report(self) -> DefaultReport:
        """The default, its provenance and its presets, as the admin endpoint shows them."""
        prov = self.provenance()
        source = prov.get("source", "fallback")
        return DefaultReport(
            key=THRESHOLD_KEY, threshold=self.stored(), fallback=calibrate.FALLBACK_THRESHOLD,
            source=source, concept_count=prov.get("concept_count"),
            calibrated_at=prov.get("calibrated_at"), noise_floor=prov.get("noise_floor"),
            set_by=prov.get("set_by"), set_at=prov.get("set_at"),
            recalibrates_after_change=(calibrate.RECALIBRATE_FRACTION
                                       if source == "calibrated" else None),
            presets=self.presets(), preset_rule=presets.RULE)

    def calibrate(self, write: bool) -> calibrate.CalibrationReport:
        """Measure the noise floor; with ``write`` store the chosen default."""
        indexed = set(self.searcher.index.ids)
        concepts = [c for c in reads.concept_labels(self.store) if c[0] in indexed]
        now = _now()
        report = calibrate.measure(self.searcher.search_many, concepts, calibrated_at=now)
        # Outliers by count: their labels are arbitrary text (a concept named
        # "...HeaderError" reads as an error in a log); `kg-fuse calibrate` names them.
        log.info("calibration over %d concepts: noise median %.3f floor %.3f max %.3f, "
                 "%d concepts left out of the floor -> default %.2f", report.concept_count,
                 report.gibberish_median, report.noise_floor, report.gibberish_max,
                 len(report.outliers), report.default)
        if write:
            self.set(report.default, provenance={
                "source": "calibrated", "concept_count": report.concept_count,
                "calibrated_at": now, "noise_floor": report.noise_floor,
                "noise_median": report.gibberish_median, "wordnet": report.wordnet})
            self.store.set_setting(CALIBRATION_KEY, report.to_json())
        return report

    def provenance(self) -> dict:
        """Where the default comes from: calibrated (on N concepts at T) or administrator.

        Stores from before provenance was recorded: a default equal to the stored
        calibration report's was calibrated, any other was set by an administrator.
        """
        stored = self.store.get_json_setting(PROVENANCE_KEY)
        if isinstance(stored, dict):
            return stored
        value = self.stored()
        if value is None:
            return {"source": "fallback"}
        report = self.store.get_json_setting(CALIBRATION_KEY)
        if isinstance(report, dict) and report.get("default") == value:
            return {"source": "calibrated", "concept_count": report.get("concept_count", 0),
                    "calibrated_at": None, "legacy": True}
        return {"source": "administrator", "set_by": None, "set_at": None}

    def recalibrate_if_drifted(self) -> bool:
        """Recalibrate a calibrated (or still unset) default when :meth:`_why_recalibrate`
        gives a reason; an administrator's value is never touched."""
        why = self._why_recalibrate()
        if why is None:
            return False
        log.info("recalibrating: %s", why)
        self.calibrate(write=True)
        return True

    def _why_recalibrate(self) -> str | None:
        """Why the default is to be measured again: the corpus changed by more than
        RECALIBRATE_FRACTION, WordNet was found or lost, it was calibrated by another
        rule (an earlier version's) or by earlier scoring, or it was never calibrated;
        None when it stands (an administrator's, an empty index, nothing changed)."""
        prov = self.provenance()
        size = len(self.searcher.index)
        source = prov.get("source")
        if source not in ("calibrated", "fallback") or not size:
            return None
        if prov.get("legacy"):
            return "earlier scoring"
        if calibrate.lexicon_changed(prov.get("wordnet")):
            return "WordNet found or lost since the calibration"
        if calibrate.rule_changed(self.store.get_json_setting(CALIBRATION_KEY)):
            return "calibrated by an earlier rule"
        count = prov.get("concept_count", 0)
        if source == "calibrated" and not calibrate.drifted(int(count or 0), size):
            return None
        return f"corpus changed from {count} to {size} concepts"
