"""Docstrings read as text: their paragraphs, the first one as a description, and the
examples view. Shared by the parsed (:mod:`.stdlib`) and the live (:mod:`.live`) corpus."""

from __future__ import annotations

import re

EXAMPLES_MAX_CHARS = 2000

_PARAGRAPH_SPLIT = re.compile(r"\n\s*\n")
_WHITESPACE = re.compile(r"\s+")


def paragraphs(docstring: str) -> list[str]:
    """Blank-line separated paragraphs, whitespace preserved inside each."""
    return [p.strip() for p in _PARAGRAPH_SPLIT.split(docstring) if p.strip()]


def first_paragraph(docstring: str) -> str:
    paras = paragraphs(docstring)
    return _WHITESPACE.sub(" ", paras[0]) if paras else ""


def examples_of(docstring: str) -> str:
    """The examples view: the doctest paragraphs if any, else the paragraphs after the
    first, capped at :data:`EXAMPLES_MAX_CHARS` (the model reads only ~256 tokens)."""
    rest = paragraphs(docstring)[1:]
    doctests = [p for p in rest if p.lstrip().startswith(">>>")]
    return "\n\n".join(doctests or rest)[:EXAMPLES_MAX_CHARS]
