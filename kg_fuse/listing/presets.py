"""The intensity presets: a threshold that follows the server default, paired with a
listing size. Imports nothing, so the server reads the same offsets.

The presets are ChromaDB's idea, relative to the calibrated default instead of fixed
numbers. The server publishes their values with its default, derived from its
calibration; a server that does not gets the default plus ``PRESET_OFFSETS``. Either way
a preset follows the default. ``comprehensive`` goes below the default, i.e. below the
noise floor: its extra results may be noise.
"""

from __future__ import annotations

STANDARD = "standard"  # the preset that means inherit
#: A preset's offset from the server default, where the server publishes no values (the
#: embedded server's own fallback too: ``server/search/tuning.py`` ``FALLBACK_OFFSETS``).
PRESET_OFFSETS: dict[str, float] = {"exact": 0.10, "comprehensive": -0.06}
PRESET_WORDS = ("exact", STANDARD, "comprehensive")
#: The most results a listing at each preset shows, before its relevance cut stops it
#: earlier (``cut.py``): the presets pair a threshold with a result count, as ChromaDB's
#: exact 5 / standard 12 / comprehensive 25 do. Any other threshold takes the size of
#: the presets' band it falls in (``listing_size``), so a higher threshold never lists
#: more; a number written to ``.meta/limit`` replaces the size (every match above the
#: threshold, up to it).
PRESET_SIZES: dict[str, int] = {"exact": 5, STANDARD: 12, "comprehensive": 25}
BELOW_NOISE_FLOOR = "comprehensive"


def preset_value(word: str, server_default: float | None,
                 published: dict[str, float] | None = None) -> float | None:
    """A preset's current value: as the server published it with its default, else the
    server default plus the preset's offset, within [0, 1]."""
    if server_default is None:
        return None
    if published and word in published:
        return published[word]
    return round(min(1.0, max(0.0, server_default + PRESET_OFFSETS[word])), 2)


def listing_size(value: float | None, server_default: float | None,
                 published: dict[str, float] | None = None) -> int:
    """The most results a listing at threshold ``value`` shows: ``exact``'s size at or
    above the exact preset's value, ``standard``'s at or above the default,
    ``comprehensive``'s below it. A size that never grows with the threshold is what
    keeps listings monotonic: a higher threshold never lists more (issue 39)."""
    if value is None or server_default is None:
        return PRESET_SIZES[STANDARD]
    exact = preset_value("exact", server_default, published)
    if exact is not None and value >= exact:
        return PRESET_SIZES["exact"]
    if value >= server_default:
        return PRESET_SIZES[STANDARD]
    return PRESET_SIZES[BELOW_NOISE_FLOOR]
