"""The settings the threshold rules keep in the store, by key.

Apart from the rules themselves so that reading one (``kg-fuse calibrate --show``, a
re-embedding leaving them behind) loads no model and no search.
"""

#: The default threshold in force (absent: the fallback applies).
THRESHOLD_KEY = "search_default_similarity_threshold"
#: Where that default came from: calibrated, an administrator's (JSON).
PROVENANCE_KEY = "search_threshold_provenance"
#: The last calibration's report (JSON): the presets are derived from it.
CALIBRATION_KEY = "search_calibration_report"

#: Every one of them is in one model's scores: a store re-embedded by another model
#: leaves them behind and calibrates its own. (The model's score scale is its record's:
#: :mod:`kg_fuse.server.store_model.record`.)
IN_MODEL_SCORES = (THRESHOLD_KEY, PROVENANCE_KEY, CALIBRATION_KEY)
