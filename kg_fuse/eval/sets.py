"""Query sets: relevant queries with the concept labels they should find, and gibberish.

A set is a TOML file::

    name = "kitchen"
    description = "..."
    serve = "kg-fuse serve --corpus none --ingest ..."   # how to serve its corpus (doc only)
    ontology = "kitchen"           # optional: search only this ontology
    gibberish_sets = ["gibberish"] # shared gibberish lists (names or paths), optional
    gibberish = ["extra nonsense"] # more gibberish of its own, optional

    [[query]]
    text = "sort a list"
    expect = ["sorted", "builtins.sorted", "list.sort"]   # any one listed is a hit
    relevant = ["sorted", "list.sort", ...]      # optional: judged by hand, file by file
    irrelevant = ["heapq.merge", ...]            # (the judged sets, ``judged-*.toml``)

The sets that ship with kg-fuse live next to this module (``sets/*.toml``); ``--set``
takes one of their names or a path to a file of the same shape.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUILTIN_DIR = Path(__file__).resolve().parent / "sets"
CORPORA_DIR = Path(__file__).resolve().parent / "corpora"


class QuerySetError(ValueError):
    """A query set that cannot be found or read; the message says which and why."""


@dataclass(frozen=True)
class RelevantQuery:
    text: str
    expect: tuple[str, ...]
    # judged by hand: every file of a listing marked relevant or not (empty: not judged)
    relevant: tuple[str, ...] = ()
    irrelevant: tuple[str, ...] = ()

    @property
    def judged(self) -> bool:
        return bool(self.relevant or self.irrelevant)


@dataclass
class QuerySet:
    name: str
    description: str = ""
    serve: str = ""
    ontology: str | None = None
    relevant: list[RelevantQuery] = field(default_factory=list)
    gibberish: list[str] = field(default_factory=list)


def builtin_names() -> list[str]:
    """Names of the shipped sets that have relevant queries (gibberish lists excluded)."""
    # a line test, not a parse: every ``kg-fuse --help`` lists these names
    return [path.stem for path in sorted(BUILTIN_DIR.glob("*.toml"))
            if "\n[[query]]" in "\n" + path.read_text(encoding="utf-8")]


def _locate(name_or_path: str, base: Path) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        path = candidate if candidate.is_absolute() else (base / candidate)
        if not path.exists() and candidate.exists():
            path = candidate
    else:
        path = BUILTIN_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise QuerySetError(f"no query set {name_or_path!r}")
    return path


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise QuerySetError(f"{path}: {exc}") from exc


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip()
                                              for v in value):
        raise QuerySetError(f"{where}: expected a list of non-empty strings")
    return [v.strip() for v in value]


def load(name_or_path: str) -> QuerySet:
    """Read a shipped set by name, or a set file by path; gibberish lists are merged."""
    path = _locate(name_or_path, Path.cwd())
    raw = _read(path)
    qset = QuerySet(
        name=str(raw.get("name") or path.stem),
        description=str(raw.get("description") or ""),
        serve=str(raw.get("serve") or ""),
        ontology=raw.get("ontology") if isinstance(raw.get("ontology"), str) else None,
    )
    qset.relevant = [_relevant(item, f"{path.name}: query #{i + 1}")
                     for i, item in enumerate(raw.get("query") or [])]
    qset.gibberish = _gibberish(raw, path)
    if not qset.relevant and not qset.gibberish:
        raise QuerySetError(f"{path}: no queries")
    return qset


def _relevant(item: Any, where: str) -> RelevantQuery:
    """One ``[[query]]``: its text, the concepts expected, the judgments if any."""
    text = item.get("text") if isinstance(item, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise QuerySetError(f"{where}: missing 'text'")
    judged = {key: tuple(_strings(item.get(key, []), f"{where}: {key}"))
              for key in ("relevant", "irrelevant")}
    return RelevantQuery(text.strip(), tuple(_strings(item.get("expect"), where)), **judged)


def _gibberish(raw: dict, path: Path) -> list[str]:
    """The gibberish of the sets named in ``gibberish_sets``, then the file's own, each
    query once."""
    gibberish: list[str] = []
    for other in _strings(raw.get("gibberish_sets", []), f"{path.name}: gibberish_sets"):
        extra = _read(_locate(other, path.parent))
        gibberish += _strings(extra.get("queries", []), f"{other}: queries")
    gibberish += _strings(raw.get("gibberish", []), f"{path.name}: gibberish")
    return list(dict.fromkeys(gibberish))
