"""The ``.meta`` control files, one row each: what a file shows, what it accepts, and
how a value it accepted is committed.

Every file is generated from the saved query. The writable ones parse the whole text a
write would produce (see ``session.WriteSession``) and commit it at a close, only when
valid and only when the value changes (so a file's mtime moves with its value);
anything else is refused with EINVAL (EFBIG over 64 KiB) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kg_fuse.fs.kernel.nodes import NodeKind
from kg_fuse.fs.queries.facade import QueryService
from kg_fuse.fs.queries.saved import QueryPath, SavedQuery
from kg_fuse.fs.tree.meta.status import query_toml, status_file, threshold_file
from kg_fuse.fs.tree.meta.values import (
    limit_file,
    parse_limit,
    parse_terms,
    parse_threshold_file,
    terms_file,
)
from kg_fuse.fs.tree.mount_tree import Tree

Render = Callable[[Tree, SavedQuery, "str | None"], bytes]
Commit = Callable[[QueryService, QueryPath, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Control:
    kind: NodeKind
    render: Render
    parse: Callable[[bytes], Any] | None = None  # None: read-only
    commit: Commit | None = None
    current: Callable[[SavedQuery], Any] | None = None  # the value a commit would replace
    append_replaces: bool = True  # '>>' sets a single value; lists append instead

    @property
    def writable(self) -> bool:
        return self.parse is not None


def _threshold(tree: Tree, query: SavedQuery, _problem: str | None) -> bytes:
    return threshold_file(query, tree.service.explain(query))


def _toml(tree: Tree, query: SavedQuery, _problem: str | None) -> bytes:
    return query_toml(query, tree.service.explain(query))


def _status(tree: Tree, query: SavedQuery, problem: str | None) -> bytes:
    listing = tree.service.listing(query.key)
    fetched_at = listing.fetched_at if listing is not None else None
    return status_file(query, tree.service.explain(query), listing,
                       problem or tree.service.server.error_since(fetched_at),
                       pending=tree.service.pending(query))


CONTROLS: dict[str, Control] = {
    "threshold": Control(NodeKind.THRESHOLD_FILE, _threshold, parse_threshold_file,
                         lambda s, p, v: s.set_threshold(p, v), lambda q: q.threshold),
    "limit": Control(NodeKind.LIMIT_FILE, lambda s, q, _: limit_file(q), parse_limit,
                     lambda s, p, v: s.set_limit(p, v), lambda q: q.limit),
    "exclude": Control(NodeKind.EXCLUDE_FILE, lambda s, q, _: terms_file(q.exclude),
                       parse_terms, lambda s, p, v: s.set_terms(p, "exclude", v),
                       lambda q: q.exclude, append_replaces=False),
    "union": Control(NodeKind.UNION_FILE, lambda s, q, _: terms_file(q.union),
                     parse_terms, lambda s, p, v: s.set_terms(p, "union", v),
                     lambda q: q.union, append_replaces=False),
    "status": Control(NodeKind.STATUS_FILE, _status),
    "query.toml": Control(NodeKind.QUERY_TOML_FILE, _toml),
}
