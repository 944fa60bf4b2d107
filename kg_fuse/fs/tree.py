"""The shape of the tree: which names a directory holds, and what a file contains.

```
/                          saved global queries + ontology/
├── ontology/<Ontology>/   documents/  ingest/  <scoped query>/
└── <query>/               .meta/  <Label>.concept.md  <nested query>/  <link>
```

Nodes are identified by (kind, owner, name): the owner is the path key of the query or
ontology directory a node belongs to (``"gzip/levels"``, ``"ontology/Text"``).
"""

from __future__ import annotations

import errno
import logging
from typing import NamedTuple

import pyfuse3
import trio

from kg_fuse.fs.catalog import Catalog, DocumentEntry
from kg_fuse.fs.control import ScratchFiles
from kg_fuse.fs.ingest import IngestBox
from kg_fuse.fs.meta import CONTROL_BY_KIND, CONTROLS
from kg_fuse.fs.names import META_DIR
from kg_fuse.fs.nodes import InodeTable, Node, NodeKind
from kg_fuse.fs.queries import ONTOLOGY_DIR, QueryPath, SavedQuery
from kg_fuse.fs.service import QueryNotFound, QueryService

log = logging.getLogger(__name__)

DOCUMENTS = "documents"
INGEST = "ingest"
ONTOLOGY_PREFIX = ONTOLOGY_DIR + "/"


class Entry(NamedTuple):
    """One name in a directory listing, and the identity of the node behind it (a
    tuple: an opendir builds one per result, and a frozen dataclass costs 3x as much)."""

    name: str
    kind: NodeKind
    owner: str
    key: str = ""


def enoent() -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(errno.ENOENT)


def ontology_of(owner: str) -> str:
    return owner[len(ONTOLOGY_PREFIX):]


def query_path(owner: str) -> QueryPath:
    return tuple(owner.split("/"))


class Tree:
    def __init__(self, service: QueryService, catalog: Catalog, ingest: IngestBox,
                 inodes: InodeTable, scratch: ScratchFiles) -> None:
        self.service = service
        self.catalog = catalog
        self.ingest = ingest
        self.inodes = inodes
        self.scratch = scratch

    def query(self, node: Node) -> SavedQuery:
        try:
            return self.service.get(query_path(node.owner))
        except QueryNotFound:
            raise enoent() from None

    async def ontology_exists(self, name: str) -> bool:
        return await self.catalog.ontology(name) is not None

    # -- listings -----------------------------------------------------------------------

    def _queries(self, parent: QueryPath) -> list[Entry]:
        return [Entry(q.name, NodeKind.QUERY_DIR, q.key) for q in self.service.children(parent)]

    async def children(self, node: Node) -> list[Entry]:
        """A directory's entries in listing order (fetching from the server if needed)."""
        kind, owner = node.kind, node.owner
        if kind is NodeKind.ROOT:
            return [Entry(ONTOLOGY_DIR, NodeKind.ONTOLOGY_ROOT, ""), *self._queries(())]
        if kind is NodeKind.ONTOLOGY_ROOT:
            return [Entry(name, NodeKind.ONTOLOGY_DIR, ONTOLOGY_PREFIX + name)
                    for name in sorted(await self.catalog.ontologies())]
        if kind is NodeKind.ONTOLOGY_DIR:
            if not await self.ontology_exists(ontology_of(owner)):
                raise enoent()
            return [Entry(DOCUMENTS, NodeKind.DOCUMENTS_DIR, owner),
                    Entry(INGEST, NodeKind.INGEST_DIR, owner),
                    *self._queries(query_path(owner))]
        if kind is NodeKind.DOCUMENTS_DIR:
            docs = await self.catalog.documents(ontology_of(owner))
            return [Entry(d.file_name, NodeKind.DOCUMENT_FILE, owner, d.document_id)
                    for d in docs.values()]
        if kind is NodeKind.INGEST_DIR:
            ontology = ontology_of(owner)
            return [Entry(n, self._ingest_kind(ontology, n), owner, n)
                    for n in self.ingest.names(ontology)]
        if kind is NodeKind.META_DIR:
            query = self.query(node)
            return [Entry(n, c.kind, query.key) for n, c in CONTROLS.items()] + [
                Entry(n, NodeKind.SCRATCH_FILE, query.key, n)
                for n in self.scratch.names(query.key)]
        if kind is NodeKind.QUERY_DIR:
            query = self.query(node)
            entries = [Entry(META_DIR, NodeKind.META_DIR, query.key),
                       *self._queries(query.path),
                       *(Entry(k.name, NodeKind.LINK, query.key, k.name) for k in query.links)]
            taken = {e.name for e in entries}
            result_set = await self.service.results(query)
            return entries + [Entry(f.name, NodeKind.RESULT_FILE, query.key, f.concept_id)
                              for f in result_set.files.values() if f.name not in taken]
        raise pyfuse3.FUSEError(errno.ENOTDIR)

    def _ingest_kind(self, ontology: str, name: str) -> NodeKind:
        return NodeKind.INGEST_FILE if self.ingest.get(ontology, name) else NodeKind.JOB_FILE

    async def child(self, parent: Node, name: str) -> Node:
        """The node for ``name`` in ``parent``, or ENOENT."""
        kind, owner = parent.kind, parent.owner
        if kind is NodeKind.META_DIR:  # fast paths that need no listing
            self.query(parent)
            control = CONTROLS.get(name)
            if control is not None:
                return self.inodes.ensure(control.kind, owner)
            if self.scratch.get(owner, name) is None:
                raise enoent()
            return self.inodes.ensure(NodeKind.SCRATCH_FILE, owner, name)
        if kind is NodeKind.INGEST_DIR:
            ontology = ontology_of(owner)
            if self.ingest.get(ontology, name) is None and self.ingest.job(ontology, name) is None:
                raise enoent()
            return self.inodes.ensure(self._ingest_kind(ontology, name), owner, name)
        if kind is NodeKind.ROOT:  # a path walk's first step: no listing built
            if name == ONTOLOGY_DIR:
                return self.inodes.ensure(NodeKind.ONTOLOGY_ROOT)
            top = self.service.find((name,))
            if top is None:
                raise enoent()
            return self.inodes.ensure(NodeKind.QUERY_DIR, top.key)
        if kind is NodeKind.QUERY_DIR:
            query = self.query(parent)
            nested = self.service.find((*query.path, name))
            if name == META_DIR:
                return self.inodes.ensure(NodeKind.META_DIR, owner)
            if nested is not None:
                return self.inodes.ensure(NodeKind.QUERY_DIR, nested.key)
            if any(k.name == name for k in query.links):
                return self.inodes.ensure(NodeKind.LINK, owner, name)
            found = (await self.service.results(query)).files.get(name)
            if found is None:
                raise enoent()
            return self.inodes.ensure(NodeKind.RESULT_FILE, owner, found.concept_id)
        for entry in await self.children(parent):
            if entry.name == name:
                return self.inodes.ensure(entry.kind, entry.owner, entry.key)
        raise enoent()

    # -- contents -----------------------------------------------------------------------

    async def mtime_ns(self, node: Node) -> int | None:
        """When a file in ``ingest/`` or ``documents/`` last changed; None for the rest."""
        kind = node.kind
        if kind is NodeKind.INGEST_FILE:
            pending = self.ingest.get(ontology_of(node.owner), node.name)
            return pending.mtime_ns if pending is not None else None
        if kind is NodeKind.JOB_FILE:
            job = self.ingest.job(ontology_of(node.owner), node.name)
            return job.mtime_ns if job is not None else None
        if kind is NodeKind.DOCUMENT_FILE:
            entry = await self.document(node)
            return entry.mtime_ns if entry is not None else None
        return None

    async def document(self, node: Node) -> DocumentEntry | None:
        """The catalog entry of a file in ``documents/`` (None once it is gone)."""
        docs = await self.catalog.documents(ontology_of(node.owner))
        return next((d for d in docs.values() if d.document_id == node.name), None)

    async def refresh_meta(self, node: Node) -> None:
        """Before showing a .meta file, learn the server default if stale; before the
        status, try to fetch the results it describes."""
        if node.kind not in CONTROL_BY_KIND:
            return
        query = self.query(node)
        if node.kind is not NodeKind.STATUS_FILE:
            await self.service.current_default()
            return
        async with trio.open_nursery() as nursery:  # both deadlines run side by side
            nursery.start_soon(self.service.current_default)
            nursery.start_soon(self.service.refresh_status, query)

    def result_body(self, node: Node) -> bytes:
        """A result file's bytes, without awaiting (a result that left the listing keeps
        its last ones)."""
        result_set = self.service.listing(node.owner)
        found = result_set.by_concept.get(node.name) if result_set else None
        if found is not None:
            node.last_body, node.last_mtime_ns = found.body, found.mtime_ns
        return node.last_body

    async def content(self, node: Node) -> bytes:
        """A file's current bytes (a result that left the listing keeps its last ones)."""
        kind = node.kind
        control = CONTROL_BY_KIND.get(kind)
        if control is not None:
            query = self.query(node)
            return control.render(self.service, query, self.service.fetch_error(query.key))
        if kind is NodeKind.RESULT_FILE:
            return self.result_body(node)
        if kind is NodeKind.SCRATCH_FILE:
            data = self.scratch.get(node.owner, node.name)
        elif kind is NodeKind.INGEST_FILE:
            pending = self.ingest.get(ontology_of(node.owner), node.name)
            data = pending.data if pending is not None else None
        elif kind is NodeKind.JOB_FILE:
            job = self.ingest.job(ontology_of(node.owner), node.name)
            data = job.render() if job is not None else None
        elif kind is NodeKind.DOCUMENT_FILE:
            data = await self.catalog.content(node.name)
        elif kind is NodeKind.LINK:
            query = self.query(node)
            data = next((k.target.encode() for k in query.links if k.name == node.name), None)
        else:
            raise pyfuse3.FUSEError(errno.EISDIR)
        if data is None:
            raise enoent()
        return bytes(data)
