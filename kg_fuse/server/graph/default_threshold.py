"""The default search threshold (ADR-508): where it is stored, where it came from
(calibrated, an administrator's, the fallback), its presets, and calibration.

A calibrated default is measured again once the corpus has changed by more than
:data:`~kg_fuse.server.search.calibrate.RECALIBRATE_FRACTION`; an administrator's value
is never touched.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from kg_fuse.server.search import calibrate
from kg_fuse.server.search.presets import derive as derive_presets
from kg_fuse.server.search.searcher import Searcher
from kg_fuse.server.storage import repository
from kg_fuse.server.storage.store import Store

log = logging.getLogger(__name__)


class DefaultThreshold:
    """The default threshold's settings, over the store, measured with the searcher."""

    def __init__(self, store: Store, searcher: Searcher) -> None:
        self.store = store
        self.searcher = searcher
        self._presets: tuple[float, str | None, dict[str, float]] | None = None

    def stored(self) -> float | None:
        """The configured default, or None when unset or unreadable."""
        try:
            raw = self.store.get_setting(calibrate.THRESHOLD_KEY)
            value = None if raw is None else float(raw)
        except (ValueError, TypeError):
            log.warning("unreadable %s setting; using the fallback", calibrate.THRESHOLD_KEY)
            return None
        if value is None or not 0.0 <= value <= 1.0:
            return None
        return value

    def default(self) -> float:
        stored = self.stored()
        return calibrate.FALLBACK_THRESHOLD if stored is None else stored

    def set(self, value: float, provenance: dict | None = None) -> None:
        """Store the default; without ``provenance`` it is an administrator's value."""
        prov = provenance or {"source": "administrator", "set_by": None,
                              "set_at": datetime.now(UTC).isoformat(timespec="seconds")}
        self.store.set_settings({calibrate.THRESHOLD_KEY: repr(float(value)),
                                 calibrate.PROVENANCE_KEY: json.dumps(prov)})

    def presets(self) -> dict[str, float]:
        """The intensity presets for the current default, from the last calibration."""
        default = self.default()
        raw = self.store.get_setting(calibrate.CALIBRATION_KEY)
        if self._presets is None or self._presets[:2] != (default, raw):
            try:
                report = None if raw is None else json.loads(raw)
            except ValueError:
                report = None
            self._presets = (default, raw, derive_presets(default, report))
        return dict(self._presets[2])

    def calibrate(self, write: bool) -> calibrate.CalibrationReport:
        """Measure the noise floor; with ``write`` store the chosen default."""
        indexed = set(self.searcher.index.ids)
        concepts = [c for c in repository.concept_labels(self.store) if c[0] in indexed]
        now = datetime.now(UTC).isoformat(timespec="seconds")
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
            self.store.set_setting(calibrate.CALIBRATION_KEY, report.to_json())
        return report

    def provenance(self) -> dict:
        """Where the default comes from: calibrated (on N concepts at T) or administrator.

        Stores from before provenance was recorded: a default equal to the stored
        calibration report's was calibrated, any other was set by an administrator.
        """
        stored = self.store.get_json_setting(calibrate.PROVENANCE_KEY)
        if isinstance(stored, dict):
            return stored
        value = self.stored()
        if value is None:
            return {"source": "fallback"}
        report = self.store.get_json_setting(calibrate.CALIBRATION_KEY)
        if isinstance(report, dict) and report.get("default") == value:
            return {"source": "calibrated", "concept_count": report.get("concept_count", 0),
                    "calibrated_at": None, "legacy": True}
        return {"source": "administrator", "set_by": None, "set_at": None}

    def recalibrate_if_drifted(self) -> bool:
        """Recalibrate a calibrated default after the corpus changed by more than
        RECALIBRATE_FRACTION, after WordNet was found or lost, or when it was calibrated
        by another rule (an earlier version's); an administrator's value is never
        touched."""
        prov = self.provenance()
        size = len(self.searcher.index)
        if prov.get("source") not in ("calibrated", "fallback") or not size:
            return False
        legacy = bool(prov.get("legacy"))
        lexicon_changed = calibrate.lexicon_changed(prov.get("wordnet"))
        rule_changed = calibrate.rule_changed(
            self.store.get_json_setting(calibrate.CALIBRATION_KEY))
        if not legacy and not lexicon_changed and not rule_changed and \
                prov.get("source") == "calibrated" and \
                not calibrate.drifted(int(prov.get("concept_count") or 0), size):
            return False
        log.info("recalibrating: %s", "earlier scoring" if legacy else
                 "WordNet found or lost since the calibration" if lexicon_changed else
                 "calibrated by an earlier rule" if rule_changed else
                 f"corpus changed from {prov.get('concept_count', 0)} to {size} concepts")
        self.calibrate(write=True)
        return True
