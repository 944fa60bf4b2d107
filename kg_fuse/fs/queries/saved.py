"""Saved queries (a directory's name read as query text and a threshold) and their
persistence, one TOML file per mountpoint.

The file is rewritten atomically (temporary file, fsync, rename) under an advisory lock
that every writing process takes, so a crash at any moment leaves either the old or the
new version, never a torn one. A file that cannot be parsed is moved aside, never
silently replaced: until the user chooses (restore a repaired copy, or start empty) every
load refuses, naming the file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import logging
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomli_w

from kg_fuse import owner_only
from kg_fuse.client.models import threshold_presets
from kg_fuse.fs.kernel.errnos import InvalidName
from kg_fuse.fs.kernel.names import UNSAFE
from kg_fuse.limits import DEFAULT_LIMIT
from kg_fuse.listing.presets import PRESET_OFFSETS
from kg_fuse.listing.thresholds import (
    INHERIT_WORDS,
    AutoAdjustment,
    InvalidThreshold,
    Threshold,
    parse_preset,
    parse_threshold_value,
)

log = logging.getLogger(__name__)

STORE_VERSION = 1
UNREADABLE = (ValueError, KeyError, TypeError, AttributeError)  # what parsing may raise
_THRESHOLD_SUFFIX = re.compile(r"^(?P<text>.*)@(?P<value>[-+]?[0-9.][0-9.eE+-]*)$", re.DOTALL)
_PRESET_SUFFIX = re.compile(r"^(?P<text>.*)@(?P<word>exact|standard|comprehensive)$",
                            re.DOTALL | re.IGNORECASE)


class StoreCorrupt(RuntimeError):
    """The query store could not be read; it was moved aside to ``kept_at``."""

    def __init__(self, path: Path, kept_at: Path, reason: str) -> None:
        super().__init__(
            f"the saved-query store {path} is unreadable ({reason}); it was moved to "
            f"{kept_at}, and nothing was discarded")
        self.kept_at = kept_at


class StoreSetAside(StoreCorrupt):
    """An earlier load moved an unreadable store aside and nothing has replaced it: a
    mount now would start empty and hide where the queries went, so it refuses."""

    def __init__(self, path: Path, kept_at: Path) -> None:
        RuntimeError.__init__(
            self, f"the saved-query store {path} was unreadable and was moved to "
                  f"{kept_at}; no store has replaced it yet")
        self.kept_at = kept_at


class StoreInUse(ValueError):
    """A choice about a set-aside store that would replace a store in use."""


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


ONTOLOGY_DIR = "ontology"

QueryPath = tuple[str, ...]


def query_key(path: QueryPath) -> str:
    """The dictionary key of a query path (names never contain ``/``)."""
    return "/".join(path)


def scope_of(path: QueryPath) -> str | None:
    """The ontology a query under ``ontology/<name>/`` is scoped to."""
    return path[1] if len(path) >= 3 and path[0] == ONTOLOGY_DIR else None


@dataclass(frozen=True)
class QueryDirName:
    text: str
    threshold: Threshold


def parse_query_dir_name(name: str) -> QueryDirName:
    """``"NAME"`` is a query for NAME; ``"NAME@0.8"`` the same with threshold 0.8;
    ``"NAME@exact"`` (or ``@standard``, ``@comprehensive``) with that preset.

    A suffix that looks numeric but is not a threshold in [0, 1] is refused rather than
    silently becoming part of the query text.
    """
    if name.startswith("."):
        raise InvalidName("query names may not start with a dot")
    if UNSAFE.search(name.replace("/", "")):
        raise InvalidName("query names may not contain control characters")
    text, threshold = name, None
    match = _THRESHOLD_SUFFIX.match(name)
    preset = _PRESET_SUFFIX.match(name)
    if preset:
        text, threshold = preset.group("text"), parse_preset(preset.group("word"))
    elif match:
        try:
            threshold = parse_threshold_value(match.group("value"))
        except InvalidThreshold as exc:
            raise InvalidName(f"bad threshold suffix in {name!r}: {exc}") from None
        text = match.group("text")
    if not text.strip():
        raise InvalidName("the query text is empty")
    return QueryDirName(text.strip(), threshold)


@dataclass(frozen=True)
class Link:
    """``ln -s TARGET NAME`` in a query directory: restricts sources to ``ontology``."""

    name: str
    target: str
    ontology: str


@dataclass(frozen=True)
class SavedQuery:
    """A query directory at ``path`` (its last part as typed), searching for ``text``.

    ``threshold`` None means the query inherits the server default; ``limit`` None means
    the default of 50 results.
    """

    path: QueryPath
    text: str
    threshold: Threshold = None  # a number, a preset word, or None (inherit)
    created_at: str = field(default_factory=now_iso)
    auto_adjusted: AutoAdjustment | None = None
    limit: int | None = None
    exclude: tuple[str, ...] = ()
    union: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def key(self) -> str:
        return query_key(self.path)

    @property
    def parent_key(self) -> str | None:
        """The enclosing query's key, for nested queries."""
        top = 3 if scope_of(self.path) else 1
        return query_key(self.path[:-1]) if len(self.path) > top else None

    @property
    def effective_limit(self) -> int:
        return self.limit or DEFAULT_LIMIT

    def with_threshold(self, threshold: Threshold) -> SavedQuery:
        """A user-written threshold: it replaces any auto-adjustment record."""
        return replace(self, threshold=threshold, auto_adjusted=None)


@dataclass
class StoreState:
    queries: dict[str, SavedQuery] = field(default_factory=dict)
    server_default_seen: float | None = None
    server_presets_seen: dict[str, float] | None = None  # published with the default


def _threshold_to_toml(value: Threshold) -> str | float:
    return INHERIT_WORDS[0] if value is None else value


def _threshold_from_toml(value: Any) -> Threshold:
    if isinstance(value, str) and value in INHERIT_WORDS:
        return None
    if isinstance(value, str) and value in PRESET_OFFSETS:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    raise ValueError(f"bad threshold {value!r}")


def adjustment_to_toml(adj: AutoAdjustment) -> dict[str, Any]:
    return {
        "from": adj.from_value,
        "to": _threshold_to_toml(adj.to_value),
        "suggested": adj.suggested,
        "server_default": adj.server_default,
    }


def _query_to_toml(q: SavedQuery) -> dict[str, Any]:
    out: dict[str, Any] = {
        "path": list(q.path),
        "text": q.text,
        "threshold": _threshold_to_toml(q.threshold),
        "created_at": q.created_at,
    }
    if q.limit is not None:
        out["limit"] = q.limit
    if q.exclude:
        out["exclude"] = list(q.exclude)
    if q.union:
        out["union"] = list(q.union)
    if q.links:
        out["links"] = [{"name": k.name, "target": k.target, "ontology": k.ontology}
                        for k in q.links]
    if q.auto_adjusted is not None:
        out["auto_adjusted"] = adjustment_to_toml(q.auto_adjusted)
    return out


def _adjustment_from_toml(raw: dict[str, Any]) -> AutoAdjustment | None:
    adj_raw = raw.get("auto_adjusted")
    if adj_raw is None:
        return None
    return AutoAdjustment(
        from_value=float(adj_raw["from"]),
        to_value=_threshold_from_toml(adj_raw["to"]),
        suggested=float(adj_raw["suggested"]),
        server_default=float(adj_raw["server_default"]),
    )


def _path_from_toml(raw: dict[str, Any]) -> QueryPath:
    path = raw.get("path") or [raw["name"]]
    if not isinstance(path, list) or not all(isinstance(p, str) and p for p in path):
        raise ValueError(f"bad query path {path!r}")
    return tuple(path)


def _limit_from_toml(raw: dict[str, Any]) -> int | None:
    limit = raw.get("limit")
    if limit is not None and (not isinstance(limit, int) or not 1 <= limit <= 1000):
        raise ValueError(f"bad limit {limit!r}")
    return limit


def _query_from_toml(raw: dict[str, Any]) -> SavedQuery:
    adj = _adjustment_from_toml(raw)
    threshold = _threshold_from_toml(raw.get("threshold", INHERIT_WORDS[0]))
    if adj is not None and adj.to_value != threshold:  # rewritten by hand since
        log.info("dropping an auto-adjustment record that no longer applies: %r", adj)
        adj = None
    path = _path_from_toml(raw)
    limit = _limit_from_toml(raw)
    return SavedQuery(
        path=path,
        text=str(raw["text"]),
        threshold=threshold,
        created_at=str(raw.get("created_at") or now_iso()),
        auto_adjusted=adj,
        limit=limit,
        exclude=tuple(str(t) for t in raw.get("exclude", [])),
        union=tuple(str(t) for t in raw.get("union", [])),
        links=tuple(Link(str(k["name"]), str(k["target"]), str(k["ontology"]))
                    for k in raw.get("links", [])),
    )


def dumps_state(state: StoreState) -> str:
    doc: dict[str, Any] = {"version": STORE_VERSION}
    if state.server_default_seen is not None:
        doc["server_default_seen"] = state.server_default_seen
    if state.server_presets_seen:
        doc["server_presets_seen"] = dict(state.server_presets_seen)
    doc["queries"] = [_query_to_toml(q) for q in state.queries.values()]
    return tomli_w.dumps(doc)


def loads_state(text: str) -> StoreState:
    doc = tomllib.loads(text)
    state = StoreState()
    seen = doc.get("server_default_seen")
    if isinstance(seen, int | float) and not isinstance(seen, bool):
        state.server_default_seen = float(seen)
    state.server_presets_seen = threshold_presets(doc.get("server_presets_seen"))
    for raw in doc.get("queries", []):
        query = _query_from_toml(raw)
        state.queries[query.key] = query
    return state


class QueryStore:
    """Reads and writes ``queries.toml`` in one mountpoint's state directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "queries.toml"
        self._lock_path = directory / "queries.toml.lock"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        owner_only.create_dir(self.directory)  # saved search texts: owner only
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def set_aside(self) -> list[Path]:
        """Unreadable stores moved aside by earlier loads, oldest first (by the time in
        their names)."""
        return sorted(self.directory.glob("queries.toml.corrupt-*"))

    def load(self) -> StoreState:
        with self._locked():
            # Under the lock nobody is mid-write: a temporary file is a crash's leftover.
            for leftover in self.directory.glob(".queries.toml.*.tmp"):
                leftover.unlink(missing_ok=True)
            try:
                return loads_state(self.path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                kept = self.set_aside()
                if kept:
                    raise StoreSetAside(self.path, kept[-1]) from None
                return StoreState()
            except UNREADABLE as exc:
                stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
                kept_at = self.path.with_name(f"queries.toml.corrupt-{stamp}-{os.getpid()}")
                os.replace(self.path, kept_at)
                raise StoreCorrupt(self.path, kept_at, str(exc)) from exc

    def start_empty(self) -> Path:
        """The user's choice after a refusal: an empty store replaces the set-aside one,
        which stays where it is. Returns the set-aside file."""
        try:
            state = self.load()
        except StoreSetAside as exc:
            self.save(StoreState())
            return exc.kept_at
        raise StoreInUse(f"{self.path} is readable ({len(state.queries)} saved queries): "
                         "there is nothing to start afresh from")

    def restore(self, source: Path) -> StoreState:
        """The user's other choice: ``source`` (a repaired copy) becomes the store, if it
        parses and no store is in use; a set-aside file restored this way is moved back.
        A refusal changes nothing."""
        with self._locked():
            if self.path.exists():
                raise StoreInUse(f"{self.path} exists: restoring would replace it")
            raw = source.read_bytes()
            try:
                state = loads_state(raw.decode("utf-8"))
            except UNREADABLE as exc:
                raise ValueError(f"{source} is still unreadable ({exc})") from exc
            self._write(raw)
        if source.parent.resolve() == self.directory.resolve():
            source.unlink(missing_ok=True)  # it is the store now
        return state

    def save(self, state: StoreState) -> None:
        """Atomically replace the file with ``state`` (blocking: call from a thread)."""
        data = dumps_state(state).encode("utf-8")
        with self._locked():
            self._write(data)
        log.debug("saved %d queries to %s", len(state.queries), self.path)

    def _write(self, data: bytes) -> None:
        """Temporary file, fsync, rename, fsync of the directory; under the lock."""
        tmp = self.path.with_name(f".queries.toml.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
