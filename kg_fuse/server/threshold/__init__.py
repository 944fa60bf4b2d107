"""The default search threshold's rules (ADR-508), in one place.

The default a search inherits and where it came from (:mod:`.default`: inherited, the
fallback, an administrator's override, calibrated and recalibrated), how it is measured
(:mod:`.calibrate` over the noise of :mod:`.noise`), the presets derived from it
(:mod:`.presets`), the model's score scale it is measured on (:mod:`.score_scale`), and
the settings they keep in the store (:mod:`.keys`).

This module imports nothing, so reading one part (``calibrate --show``) loads no other.
"""
