"""What each kind of directory holds, and what can be made or removed in it (``.meta``
is ``meta/directory.py``'s).

The rules of the tree live here, not in the FUSE layer: which names are reserved, that
an ontology directory's name must be listable as typed, that ``rmdir`` of an ontology
needs ``--allow-ontology-delete``, and that links are made only in global queries.
"""

from __future__ import annotations

from kg_fuse.fs.kernel.errnos import (
    Exists,
    InvalidName,
    NameTooLong,
    NoEntry,
    NotDirectory,
    NotEmpty,
    NotPermitted,
)
from kg_fuse.fs.kernel.names import META_DIR
from kg_fuse.fs.kernel.nodes import Node, NodeKind
from kg_fuse.fs.queries.catalog import ontology_file_name
from kg_fuse.fs.queries.saved import (
    ONTOLOGY_DIR,
    Link,
    QueryPath,
    parse_query_dir_name,
    scope_of,
)
from kg_fuse.fs.tree.behaviour import Behaviour
from kg_fuse.fs.tree.links import link_target_ontology
from kg_fuse.fs.tree.mount_tree import Entry, Tree, query_path

DOCUMENTS = "documents"
INGEST = "ingest"
# Names a query may not take where the tree puts its own directories.
RESERVED = frozenset({ONTOLOGY_DIR, DOCUMENTS, INGEST, META_DIR})


class Directory(Behaviour):
    is_dir = True


class QueryHolder(Directory):
    """A directory where ``mkdir NAME`` saves a query (the root, an ontology, a query)."""

    reserved: frozenset[str] = RESERVED

    def query_base(self, node: Node) -> QueryPath:
        """The path new queries in this directory extend."""
        return query_path(node.owner)

    async def mkdir(self, tree: Tree, parent: Node, name: str) -> Node:
        taken = {e.name for e in await self.children(tree, parent)}
        if name in taken or name in self.reserved:
            raise Exists(name)
        query = await tree.service.create((*self.query_base(parent), name))
        tree.touch(parent)
        return tree.inodes.ensure(NodeKind.QUERY_DIR, query.key)

    async def rename(self, tree: Tree, parent: Node, old: str, new_parent: Node,
                     new: str) -> None:
        """``mv OLD NEW`` of a query in this directory renames it, settings and all.
        Moving it elsewhere is refused (EPERM: EXDEV would have ``mv`` copy it, making a
        new query and failing on its results), and so is a name that is taken: the
        tree's own directory (``ontology``, ``documents``, ``ingest``, ``.meta``) EEXIST
        (checked first, as ``mkdir`` says), a query or any other directory here is never
        empty (ENOTEMPTY), a file or link is no directory (ENOTDIR). A name ``mkdir``
        refuses (invalid, or kept for a directory the tree has elsewhere) is EPERM here:
        ``mv`` reports EINVAL as moving a directory into itself, and EEXIST onto a name
        that is not there as overwriting a non-directory."""
        base = self.query_base(parent)
        source = tree.service.find((*base, old))
        if source is None:
            raise NotPermitted(f"only queries can be renamed here, not {old!r}")
        if new_parent is not parent:
            raise NotPermitted("a query is renamed in its own directory; it cannot move")
        taken = {e.name: e.kind for e in await self.children(tree, parent)}
        if new in self.reserved:  # where the tree keeps it: as mkdir says
            if new in taken:
                raise Exists(new)
            raise NotPermitted(f"{new!r} is kept for the tree's own directories")
        if new in taken:
            raise NotEmpty(new) if taken[new].is_dir else NotDirectory(new)
        try:
            parse_query_dir_name(new)
        except NameTooLong:
            raise
        except InvalidName as exc:
            raise NotPermitted(f"{new!r} cannot name a query: {exc}") from None
        for old_key, new_key in await tree.service.rename(source.path, (*base, new)):
            tree.inodes.move_owner(old_key, new_key)
        tree.touch(parent)


class Root(QueryHolder):
    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        return [Entry(ONTOLOGY_DIR, NodeKind.ONTOLOGY_ROOT, ""), *tree.queries(())]

    async def child(self, tree: Tree, node: Node, name: str) -> Node:
        # a path walk's first step: no listing built
        if name == ONTOLOGY_DIR:
            return tree.inodes.ensure(NodeKind.ONTOLOGY_ROOT)
        top = tree.service.find((name,))
        if top is None:
            raise NoEntry(name)
        return tree.inodes.ensure(NodeKind.QUERY_DIR, top.key)

    def query_base(self, node: Node) -> QueryPath:
        return ()


class OntologyRoot(Directory):
    """``ontology/``: one directory per ontology on the server; ``mkdir`` makes one."""

    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        return [Entry(name, NodeKind.ONTOLOGY_DIR, name)
                for name in sorted(await tree.catalog.ontologies())]

    async def mkdir(self, tree: Tree, parent: Node, name: str) -> Node:
        if ontology_file_name(name) != name:  # it would be listed under another name
            raise InvalidName(f"not a valid ontology directory name: {name!r}")
        await tree.catalog.create_ontology(name)
        tree.touch(parent)
        return tree.inodes.ensure(NodeKind.ONTOLOGY_DIR, name)


class OntologyDir(QueryHolder):
    """``ontology/NAME/``: its documents, its drop box and the queries scoped to it."""

    def query_base(self, node: Node) -> QueryPath:
        return (ONTOLOGY_DIR, node.owner)

    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        if not await tree.ontology_exists(node.owner):
            raise NoEntry(node.owner)
        return [Entry(DOCUMENTS, NodeKind.DOCUMENTS_DIR, node.owner),
                Entry(INGEST, NodeKind.INGEST_DIR, node.owner),
                *tree.queries(self.query_base(node))]

    async def rmdir(self, tree: Tree, node: Node) -> bool:
        if not tree.allow_ontology_delete:
            raise NotPermitted("deleting an ontology needs --allow-ontology-delete")
        await tree.catalog.delete_ontology(node.owner)  # waited for while the server works
        tree.service.server.content_changed()  # its concepts leave every listing now
        return True


class DocumentsDir(Directory):
    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        docs = await tree.catalog.documents(node.owner)
        return [Entry(d.file_name, NodeKind.DOCUMENT_FILE, node.owner, d.document_id)
                for d in docs.values()]


def _ingest_kind(tree: Tree, ontology: str, name: str) -> NodeKind:
    return NodeKind.INGEST_FILE if tree.ingest.get(ontology, name) else NodeKind.JOB_FILE


class IngestDir(Directory):
    """``ingest/``: files copied in are uploaded; ``NAME.ingesting`` shows each job."""

    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        ontology = node.owner
        return [Entry(n, _ingest_kind(tree, ontology, n), node.owner, n)
                for n in tree.ingest.names(ontology)]

    async def child(self, tree: Tree, node: Node, name: str) -> Node:
        ontology = node.owner
        if tree.ingest.get(ontology, name) is None and tree.ingest.job(ontology, name) is None:
            raise NoEntry(name)
        return tree.inodes.ensure(_ingest_kind(tree, ontology, name), node.owner, name)

    async def create(self, tree: Tree, parent: Node, name: str) -> Node:
        pending = tree.ingest.create(parent.owner, name)
        tree.ingest.opened(pending)
        return tree.inodes.ensure(NodeKind.INGEST_FILE, parent.owner, name)

    async def rename(self, tree: Tree, parent: Node, old: str, new_parent: Node,
                     new: str) -> None:
        """``mv`` within or between drop boxes: the upload goes where the file went."""
        if new_parent.kind is not NodeKind.INGEST_DIR:
            raise NotPermitted("a file in ingest/ can only move to another ingest/")
        tree.ingest.move((parent.owner, old), (new_parent.owner, new))
        tree.inodes.move((NodeKind.INGEST_FILE, parent.owner, old),
                         (NodeKind.INGEST_FILE, new_parent.owner, new))


class QueryDir(QueryHolder):
    """A saved query: one file per result, nested queries, links and ``.meta/``."""

    reserved = frozenset({META_DIR})  # the query's own settings

    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        """The results first, best first (what ``ls -U | head`` is for), then nested
        queries, links, and ``.meta`` last. A result never takes the name of another
        entry."""
        query = tree.query(node)
        others = [*tree.queries(query.path),
                  *(Entry(k.name, NodeKind.LINK, query.key, k.name) for k in query.links),
                  Entry(META_DIR, NodeKind.META_DIR, query.key)]
        taken = {e.name for e in others}
        result_set = await tree.service.results(query)
        return [Entry(f.name, NodeKind.RESULT_FILE, query.key, f.concept_id)
                for f in result_set.files.values() if f.name not in taken] + others

    async def child(self, tree: Tree, node: Node, name: str) -> Node:
        query = tree.query(node)
        if name == META_DIR:
            return tree.inodes.ensure(NodeKind.META_DIR, node.owner)
        nested = tree.service.find((*query.path, name))
        if nested is not None:
            return tree.inodes.ensure(NodeKind.QUERY_DIR, nested.key)
        if any(k.name == name for k in query.links):
            return tree.inodes.ensure(NodeKind.LINK, node.owner, name)
        found = (await tree.service.results(query)).files.get(name)
        if found is None:
            raise NoEntry(name)
        return tree.inodes.ensure(NodeKind.RESULT_FILE, node.owner, found.concept_id)

    async def rmdir(self, tree: Tree, node: Node) -> bool:
        await tree.service.remove(query_path(node.owner))  # its scratch files too
        return True

    async def symlink(self, tree: Tree, parent: Node, name: str, target: str) -> Node:
        """``ln -s ../ontology/NAME LINK``: the query also searches that ontology."""
        if scope_of(query_path(parent.owner)) is not None:
            raise NotPermitted("a scoped query searches its own ontology: no links")
        if name in {e.name for e in await self.children(tree, parent)}:
            raise Exists(name)
        ontology = link_target_ontology(parent.owner, target, tree.mountpoint)
        if not await tree.ontology_exists(ontology):
            raise InvalidName(f"no ontology {ontology!r} on the server")
        await tree.service.add_link(query_path(parent.owner), Link(
            name, target, tree.catalog.server_name(ontology)))
        tree.touch(parent)
        return tree.inodes.ensure(NodeKind.LINK, parent.owner, name)
