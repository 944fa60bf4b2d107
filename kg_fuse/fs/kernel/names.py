"""File and directory names as the kernel takes them: decoded, valid, unique and stable
(a query directory's name becomes query text in ``queries.saved``)."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import unicodedata
from collections.abc import Callable

from kg_fuse.client.models import clean_text
from kg_fuse.fs.kernel.errnos import InvalidName, NameTooLong

NAME_MAX = 255
PATH_MAX = 4096
RESULT_SUFFIX = ".concept.md"
META_DIR = ".meta"
UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029/]")
__all__ = ["InvalidName", "NameTooLong"]  # raised here, defined with their errnos


def decode_name(raw: bytes, max_bytes: int = NAME_MAX) -> str:
    """Decode a name from the kernel; names that are not UTF-8 cannot be query text,
    and names over 255 bytes would break ``cp -r`` and ``tar x`` elsewhere."""
    if len(raw) > max_bytes:
        raise NameTooLong(f"name of {len(raw)} bytes (at most {max_bytes})")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidName(f"name is not UTF-8: {os.fsdecode(raw)!r}") from None


def _truncate_utf8(text: str, max_bytes: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def _without_format_controls(text: str) -> str:
    """Format characters (Unicode's Cf: bidi overrides such as U+202E, zero-width
    spaces) replaced by spaces: ``\u202egnp.exe`` would display as ``exe.png``."""
    if text.isascii():
        return text
    return "".join(" " if unicodedata.category(c) == "Cf" else c for c in text)


def valid_file_name(stem: str, suffix: str = "") -> str:
    """``stem + suffix`` made valid: no ``/``, NUL, control or format characters, no
    leading dot, at most 255 bytes (the stem is cut on a character boundary)."""
    cleaned, suffix = (UNSAFE.sub(lambda m: "∕" if m.group() == "/" else " ",
                                   _without_format_controls(clean_text(part)))
                       for part in (stem, suffix))  # a document's suffix is its own
    cleaned = unicodedata.normalize("NFC", " ".join(cleaned.split()))
    cleaned = cleaned.lstrip(".") or "unnamed"
    return _truncate_utf8(cleaned, NAME_MAX - len(suffix.encode("utf-8"))).rstrip() + suffix


def result_file_name(label: str, disambiguator: str = "") -> str:
    """``<label>.concept.md``, made valid (see ``valid_file_name``)."""
    tail = f" ~{disambiguator}" if disambiguator else ""
    suffix = tail + RESULT_SUFFIX
    return valid_file_name(label, suffix)


class NameRegistry:
    """Assigns each object (concept, document) in one directory a unique name that it
    keeps for as long as the mount lives, so names are stable across refreshes even when
    labels collide. ``namer(label, disambiguator)`` makes a candidate name."""

    def __init__(self, namer: Callable[[str, str], str] = result_file_name) -> None:
        self._namer = namer
        self._by_concept: dict[str, str] = {}
        self._by_name: dict[str, str] = {}

    def name_for(self, concept_id: str, label: str) -> str:
        existing = self._by_concept.get(concept_id)
        if existing is not None:
            return existing
        name = self._namer(label, "")
        if name in self._by_name:
            digest = hashlib.sha256(concept_id.encode("utf-8")).hexdigest()
            candidates = [self._namer(label, digest[:w]) for w in (6, 12, 64)]
            counter = 2
            while all(c in self._by_name for c in candidates):
                candidates = [self._namer(label, f"{digest[:6]}-{counter}")]
                counter += 1
            name = next(c for c in candidates if c not in self._by_name)
        name = sys.intern(name)  # identical in every query that lists the concept
        self._by_concept[concept_id] = name
        self._by_name[name] = concept_id
        return name
