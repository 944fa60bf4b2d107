"""The default search threshold's rules (ADR-508), in one place.

The default a search inherits and where it came from (:mod:`.default`: inherited, the
fallback, an administrator's override, calibrated and recalibrated), how it is measured
(:mod:`.calibrate` over the noise of :mod:`.noise`), the presets derived from it
(:mod:`.presets`), and the settings they keep in the store (:mod:`.keys`). The scores it
is measured on are mapped by the store's model's scale
(:mod:`kg_fuse.server.store_model`).

This module imports nothing, so reading one part (``calibrate --show``) loads no other.
"""
