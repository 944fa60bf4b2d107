"""The values of the writable control files as text: how each is parsed from what was
written (a refusal raises, EINVAL) and shown (``limit``, ``exclude``, ``union``; the
threshold's text is ``status.threshold_file``)."""

from __future__ import annotations

import unicodedata

from kg_fuse.fs.kernel.errnos import Invalid
from kg_fuse.fs.queries.saved import SavedQuery
from kg_fuse.limits import DEFAULT_LIMIT, MAX_LIMIT
from kg_fuse.listing.thresholds import INHERIT_WORDS, InvalidThreshold, Threshold, parse_threshold

MAX_TERM_CHARS = 500  # the longest exclude/union term accepted
MAX_TERMS = 100


class InvalidSetting(Invalid):
    """Text that is not a valid value for a control file (EINVAL)."""


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidSetting("not UTF-8 text") from None


def _values(data: bytes) -> list[str]:
    return [line.strip() for line in _text(data).splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _short(text: str) -> str:
    """A hostile value's first characters, for messages and logs."""
    return repr(text[:40] + ("..." if len(text) > 40 else ""))


def parse_threshold_file(data: bytes) -> Threshold:
    """Parse what was written to ``.meta/threshold``: a number, a preset word
    (``exact``, ``standard`` = inherit, ``comprehensive``), or None for inherit.

    Comment lines (``#``) and blank lines are ignored, so saving the file unchanged
    from an editor keeps it inheriting. Empty means inherit.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidThreshold("not UTF-8 text") from None
    tokens: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            tokens.extend(stripped.split())
    if not tokens:
        return None
    if len(tokens) > 1:
        raise InvalidThreshold(f"expected one value, got {len(tokens)}")
    return parse_threshold(tokens[0])


def parse_limit(data: bytes) -> int | None:
    """A whole number in 1..1000, or ``default``/empty for the default of 50."""
    values = _values(data)
    if not values or (len(values) == 1 and values[0].lower() in INHERIT_WORDS):
        return None
    if len(values) != 1 or not values[0].isascii() or not values[0].isdigit():
        raise InvalidSetting(f"not one whole number: {_short(values[0])}")
    digits = values[0].lstrip("0") or "0"
    if len(digits) > len(str(MAX_LIMIT)):  # before int(), which fails on 5,000 digits
        raise InvalidSetting(f"limit out of range 1..{MAX_LIMIT}: {_short(values[0])}")
    limit = int(digits)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidSetting(f"limit out of range 1..{MAX_LIMIT}: {limit}")
    return limit


def _has_control_character(term: str) -> bool:
    if term.isprintable():  # C speed; the per-character check only for the rest
        return False
    return any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in term)


def parse_terms(data: bytes) -> tuple[str, ...]:
    """One term per line; blank lines ignored, duplicates dropped, order kept.

    Linear in the input, and it stops at the first line over a limit, so a megabyte of
    text costs no more than the limits allow."""
    terms: dict[str, None] = {}  # insertion-ordered set
    for line in _text(data).splitlines():
        term = line.strip()
        if not term:
            continue
        if len(term) > MAX_TERM_CHARS:
            raise InvalidSetting(f"term longer than {MAX_TERM_CHARS} characters")
        if _has_control_character(term):
            raise InvalidSetting(f"control character in term {_short(term)}")
        terms[term] = None
        if len(terms) > MAX_TERMS:
            raise InvalidSetting(f"more than {MAX_TERMS} terms")
    return tuple(terms)


def limit_file(query: SavedQuery) -> bytes:
    lines = [
        f"# How many results this query lists (1..{MAX_LIMIT}); 'default' means "
        f"{DEFAULT_LIMIT}.",
        f"# Effective limit: {query.effective_limit}",
        "default" if query.limit is None else str(query.limit),
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


def terms_file(terms: tuple[str, ...]) -> bytes:
    return "".join(f"{t}\n" for t in terms).encode("utf-8")
