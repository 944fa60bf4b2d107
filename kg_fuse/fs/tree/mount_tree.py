"""``Tree``: the domain parts of one mount that every node kind's behaviour works with,
and the names they list (``Entry``).

Nodes are identified by (kind, owner, name): the owner is the saved query or the
ontology a node belongs to, as its kind says (``NodeKind.owner``): the query's key
(``"gzip/levels"``) or the ontology's name (``"Text"``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import NamedTuple

from kg_fuse.fs.kernel.nodes import InodeTable, Node, NodeKind, Owner
from kg_fuse.fs.kernel.notices import KernelCache
from kg_fuse.fs.queries.catalog import Catalog
from kg_fuse.fs.queries.facade import QueryService
from kg_fuse.fs.queries.ingest import IngestBox
from kg_fuse.fs.queries.saved import QueryPath, SavedQuery
from kg_fuse.fs.tree.attrs import Attributes
from kg_fuse.fs.tree.meta.scratch import ScratchFiles

log = logging.getLogger(__name__)


class Entry(NamedTuple):
    """One name in a directory listing, and the identity of the node behind it (a
    tuple: an opendir builds one per result, and a frozen dataclass costs 3x as much)."""

    name: str
    kind: NodeKind
    owner: str
    key: str = ""


def query_path(owner: str) -> QueryPath:
    return tuple(owner.split("/"))


@dataclass
class Tree:
    """The domain parts of one mount, which every behaviour works with (made by
    ``mount.assemble``). Saved queries, their listings and the server's default are
    reached through ``service`` alone."""

    service: QueryService
    catalog: Catalog
    ingest: IngestBox
    inodes: InodeTable
    kernel: KernelCache
    scratch: ScratchFiles
    attrs: Attributes
    mountpoint: str = ""
    allow_ontology_delete: bool = False
    allow_document_delete: bool = False

    async def settle(self) -> None:
        """After a committed change: wait until the kernel dropped what it cached (names
        that left a listing stop resolving before a write returns)."""
        await self.kernel.flush()

    def query(self, node: Node) -> SavedQuery:
        """The saved query a node belongs to (NoEntry once it was removed)."""
        return self.service.get(query_path(node.owner))

    async def ontology_exists(self, name: str) -> bool:
        return await self.catalog.ontology(name) is not None

    def queries(self, parent: QueryPath) -> list[Entry]:
        return [Entry(q.name, NodeKind.QUERY_DIR, q.key)
                for q in self.service.children(parent)]

    def touch(self, node: Node, part: NodeKind | None = None) -> None:
        """The directory ``node`` (or, with ``part``, one of its query's control files'
        value) changed now; a query's mtimes are kept with its state."""
        now = time.time_ns()
        if node.kind.owner is not Owner.QUERY:
            self.attrs.touch((node.kind.owner, node.owner), now)
        elif not self.service.held.touch(node.owner, now, part):
            log.debug("no query %r to touch", node.owner)

    def mtime_ns(self, node: Node, part: NodeKind | None = None) -> int:
        """When the directory ``node`` (or its query's control file ``part``) changed."""
        if node.kind.owner is Owner.QUERY:
            found = self.service.held.meta_mtime_ns(node.owner, part)
            if found is not None:
                return found
        return self.attrs.meta_mtime_ns((node.kind.owner, node.owner))
