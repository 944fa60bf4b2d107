"""Moved to :mod:`kg_fuse.server.search.calibrate`; this name is kept only for
``server/commands.py``, which imports it lazily, until that module imports from the
search package (then delete this file)."""

from kg_fuse.server.search.calibrate import (  # noqa: F401
    CALIBRATION_KEY,
    CalibrationReport,
    format_report,
)
