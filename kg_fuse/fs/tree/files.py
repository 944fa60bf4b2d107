"""What each kind of file outside ``.meta`` contains, and how it is written, truncated
and removed (the ``.meta`` files are ``meta/files.py``'s)."""

from __future__ import annotations

import os

from kg_fuse.fs.kernel.errnos import NoEntry, NotPermitted
from kg_fuse.fs.kernel.holders import still_held_by
from kg_fuse.fs.kernel.nodes import Node, NodeKind
from kg_fuse.fs.queries.ingest import PendingFile
from kg_fuse.fs.tree.behaviour import Behaviour, Caching
from kg_fuse.fs.tree.handles import FileHandle
from kg_fuse.fs.tree.mount_tree import Tree, query_path

XATTR_SCORE = b"user.kg.score"
XATTR_CONCEPT = b"user.kg.concept_id"
XATTR_WHY = b"user.kg.why"  # why it is listed: the file's "Why" part
XATTR_WARNINGS = b"user.kg.warnings"  # a document's status: one warning per line


def _pending(tree: Tree, node: Node) -> PendingFile:
    pending = tree.ingest.get(node.owner, node.name)
    if pending is None:
        raise NoEntry(node.name)
    return pending


class IngestFile(Behaviour):
    """A file being written into ``ingest/``, uploaded after its last close."""

    writable = chown = live = True

    async def content(self, tree: Tree, node: Node) -> bytes:
        return bytes(_pending(tree, node).data)

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        return _pending(tree, node).mtime_ns

    async def set_times(self, tree: Tree, node: Node, mtime_ns: int | None) -> None:
        pending = _pending(tree, node)
        if mtime_ns is not None:  # ``cp -p``: what ``ls -l`` shows until the upload
            pending.mtime_ns = mtime_ns

    async def open(self, tree: Tree, handle: FileHandle, flags: int) -> None:
        pending = _pending(tree, handle.node)
        tree.ingest.opened(pending)
        if flags & os.O_TRUNC:
            tree.ingest.truncate(pending, 0)

    async def truncate(self, tree: Tree, node: Node, size: int,
                       handle: FileHandle | None) -> None:
        tree.ingest.truncate(_pending(tree, node), size)

    async def write(self, tree: Tree, handle: FileHandle, offset: int, data: bytes) -> int:
        tree.ingest.write(_pending(tree, handle.node), offset, data)
        return len(data)

    async def flush(self, tree: Tree, handle: FileHandle) -> None:
        """A descriptor closed: a file still empty when its opener closed it, and open
        nowhere else, is refused with ENODATA and goes (``touch`` in ``ingest/`` says
        so). A child that inherited the descriptor and exits before anything is
        written (``cmd > ingest/f``) changes nothing."""
        node = handle.node
        pending = tree.ingest.get(node.owner, node.name)
        if pending is None or not tree.ingest.empty_at_close(pending, node.name):
            return
        if await still_held_by(handle.opener, node.inode):
            return
        if tree.ingest.get(node.owner, node.name) is not pending \
                or not tree.ingest.empty_at_close(pending, node.name):
            return  # written or removed while /proc was read
        refused = tree.ingest.refuse_empty(node.owner, node.name)
        tree.inodes.detach(node.kind, node.owner, node.name)
        directory = tree.inodes.find(NodeKind.INGEST_DIR, node.owner)
        if directory is not None:
            tree.touch(directory)
            tree.kernel.forget_name(directory.inode, node.name)
            tree.kernel.flush_soon()
        raise refused

    async def release(self, tree: Tree, handle: FileHandle) -> None:
        node = handle.node
        pending = tree.ingest.get(node.owner, node.name)
        if pending is not None:
            tree.ingest.closed(node.owner, node.name, pending)

    async def unlink(self, tree: Tree, node: Node) -> bool:
        tree.ingest.remove(node.owner, node.name)  # cancels the upload
        return True


class JobFile(Behaviour):
    """``NAME.ingesting``: the upload's job, as the server reports it."""

    async def content(self, tree: Tree, node: Node) -> bytes:
        job = tree.ingest.job(node.owner, node.name)
        if job is None:
            raise NoEntry(node.name)
        return job.render()

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        job = tree.ingest.job(node.owner, node.name)
        return job.mtime_ns if job is not None else tree.mtime_ns(node)

    async def unlink(self, tree: Tree, node: Node) -> bool:
        tree.ingest.remove(node.owner, node.name)  # dismisses a finished job
        return True


class DocumentFile(Behaviour):
    """A document of an ontology, as ingested (its id is its content hash)."""

    caching = Caching.PAGES

    async def content(self, tree: Tree, node: Node) -> bytes:
        return await tree.catalog.content(node.name)

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        entry = await tree.catalog.document(node.owner, node.name)
        return entry.mtime_ns if entry is not None else tree.mtime_ns(node)

    async def xattr_names(self, tree: Tree, node: Node) -> list[bytes]:
        entry = await tree.catalog.document(node.owner, node.name)
        return [XATTR_WARNINGS] if entry is not None and entry.warnings else []

    async def xattr(self, tree: Tree, node: Node, name: bytes) -> bytes | None:
        entry = await tree.catalog.document(node.owner, node.name)
        if name == XATTR_WARNINGS and entry is not None and entry.warnings:
            return "\n".join(entry.warnings).encode()
        return None

    async def unlink(self, tree: Tree, node: Node) -> bool:
        if not tree.allow_document_delete:
            raise NotPermitted("deleting a document needs --allow-document-delete")
        await tree.catalog.delete_document(node.name)
        tree.service.server.content_changed()
        return True


class ResultFile(Behaviour):
    """One concept a query found; an inode the kernel still holds after the result left
    the listing keeps its last bytes."""

    caching = Caching.KEEP
    instant = True

    def now(self, tree: Tree, node: Node) -> tuple[bytes, int]:
        result_set = tree.service.listing(node.owner)
        found = result_set.by_concept.get(node.name) if result_set else None
        if found is not None:
            node.last_body, node.last_mtime_ns = found.body, found.mtime_ns
        return node.last_body, node.last_mtime_ns

    async def content(self, tree: Tree, node: Node) -> bytes:
        return self.now(tree, node)[0]

    async def mtime_ns(self, tree: Tree, node: Node) -> int:
        return node.last_mtime_ns

    async def xattr_names(self, tree: Tree, node: Node) -> list[bytes]:
        return [XATTR_SCORE, XATTR_CONCEPT, XATTR_WHY]

    def entry_timeout(self, tree: Tree, node: Node) -> float:
        return tree.service.held.ttl(node.owner)

    async def xattr(self, tree: Tree, node: Node, name: bytes) -> bytes | None:
        if name == XATTR_CONCEPT:
            return node.name.encode()
        result_set = tree.service.listing(node.owner)
        found = result_set.by_concept.get(node.name) if result_set else None
        if name == XATTR_SCORE and found is not None:
            return f"{found.score:.6f}".encode()
        if name == XATTR_WHY and found is not None and found.why:
            return found.why
        return None

    async def unlink(self, tree: Tree, node: Node) -> bool:
        return False  # generated: ``rm -r QUERY`` removes the query quietly


class LinkFile(Behaviour):
    """``ln -s ../ontology/NAME LINK`` in a query: the query also searches NAME."""

    is_link = True

    async def content(self, tree: Tree, node: Node) -> bytes:
        query = tree.query(node)
        target = next((k.target for k in query.links if k.name == node.name), None)
        if target is None:
            raise NoEntry(node.name)
        return target.encode()

    async def unlink(self, tree: Tree, node: Node) -> bool:
        await tree.service.remove_link(query_path(node.owner), node.name)
        return True
