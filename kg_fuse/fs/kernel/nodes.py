"""The inode table: every name the kernel may hold, indexed by inode and by identity.

Nodes are created on demand for a key such as ``(NodeKind.RESULT_FILE, query, concept_id)``;
the inode number is derived from the key, so the same object keeps its number. Lookup
counts follow the kernel's: ``forget`` bringing a count to zero frees the node, so the
table stays bounded. A node whose object went away (``detach``) keeps answering until
it is forgotten.
"""

from __future__ import annotations

import enum
import hashlib
import logging
from dataclasses import dataclass

import pyfuse3

log = logging.getLogger(__name__)


class NodeKind(enum.Enum):
    ROOT = "root"
    ONTOLOGY_ROOT = "ontology/"
    ONTOLOGY_DIR = "ontology directory"
    DOCUMENTS_DIR = "documents/"
    DOCUMENT_FILE = "document"
    INGEST_DIR = "ingest/"
    INGEST_FILE = "file being ingested"
    JOB_FILE = "ingestion job"
    QUERY_DIR = "query directory"
    META_DIR = ".meta directory"
    THRESHOLD_FILE = ".meta/threshold"
    LIMIT_FILE = ".meta/limit"
    EXCLUDE_FILE = ".meta/exclude"
    UNION_FILE = ".meta/union"
    STATUS_FILE = ".meta/status"
    QUERY_TOML_FILE = ".meta/query.toml"
    SCRATCH_FILE = ".meta scratch file"
    RESULT_FILE = "result file"
    LINK = "ontology link"

    @property
    def is_dir(self) -> bool:
        return self in _DIRS

    @property
    def owner(self) -> Owner:
        """What the ``owner`` of a node of this kind names."""
        return _OWNERS.get(self, Owner.QUERY)


class Owner(enum.Enum):
    """What a node's ``owner`` string is: nothing (the top directories), an ontology's
    name, or a saved query's key (its path from the root, ``"gzip/levels"``)."""

    TOP = "the mount's top directories"
    ONTOLOGY = "an ontology"
    QUERY = "a saved query"


_DIRS = frozenset({NodeKind.ROOT, NodeKind.ONTOLOGY_ROOT, NodeKind.ONTOLOGY_DIR,
                   NodeKind.DOCUMENTS_DIR, NodeKind.INGEST_DIR, NodeKind.QUERY_DIR,
                   NodeKind.META_DIR})
_OWNERS = {
    NodeKind.ROOT: Owner.TOP, NodeKind.ONTOLOGY_ROOT: Owner.TOP,
    **{kind: Owner.ONTOLOGY for kind in (NodeKind.ONTOLOGY_DIR, NodeKind.DOCUMENTS_DIR,
                                         NodeKind.DOCUMENT_FILE, NodeKind.INGEST_DIR,
                                         NodeKind.INGEST_FILE, NodeKind.JOB_FILE)},
}


NodeKey = tuple[NodeKind, str, str]
SHRINK_ABOVE = 4096  # nodes: below that, an oversized dict costs too little to rebuild
_INODE_MASK = (1 << 63) - 1


@dataclass(eq=False, slots=True)  # one per inode the kernel holds: keep it small
class Node:
    inode: int
    kind: NodeKind
    owner: str  # the query's key or the ontology's name, as ``kind.owner`` says
    name: str  # concept/document id, or a file or link name; "" for one-per-owner nodes
    lookups: int = 0
    attached: bool = True
    # The last content served, so an inode the kernel still holds keeps answering after
    # its result left the listing; for status and query.toml, when their bytes changed.
    last_body: bytes = b""
    last_mtime_ns: int = 0

    @property
    def key(self) -> NodeKey:
        return (self.kind, self.owner, self.name)


class InodeTable:
    def __init__(self) -> None:
        self._by_inode: dict[int, Node] = {}
        self._by_key: dict[NodeKey, Node] = {}
        self._peak = 0  # the most nodes held since the dicts were last rebuilt
        self.root = self._add(pyfuse3.ROOT_INODE, NodeKind.ROOT, "", "")

    def __len__(self) -> int:
        return len(self._by_inode)

    def _add(self, inode: int, kind: NodeKind, owner: str, name: str) -> Node:
        node = Node(inode, kind, owner, name)
        self._by_inode[inode] = node
        self._by_key[node.key] = node
        self._peak = max(self._peak, len(self._by_inode))
        return node

    def _shrink_if_sparse(self) -> None:
        """A dict never shrinks when entries are deleted: once the kernel forgot most of
        what it held, rebuild both, so the table's memory follows its size."""
        if self._peak > SHRINK_ABOVE and len(self._by_inode) * 8 < self._peak:
            self._by_inode = dict(self._by_inode)
            self._by_key = dict(self._by_key)
            self._peak = len(self._by_inode)

    def get(self, inode: int) -> Node | None:
        return self._by_inode.get(inode)

    def find(self, kind: NodeKind, owner: str = "", name: str = "") -> Node | None:
        return self._by_key.get((kind, owner, name))

    def ensure(self, kind: NodeKind, owner: str = "", name: str = "") -> Node:
        """The node for this identity, creating it if needed."""
        node = self._by_key.get((kind, owner, name))
        if node is None:
            node = self._add(self._free_inode((kind, owner, name)), kind, owner, name)
        return node

    def _free_inode(self, key: NodeKey) -> int:
        """An inode number derived from the identity, so the same result keeps its
        number even after the kernel forgot it (and across remounts); on a collision with
        a live node, the next free number."""
        digest = hashlib.blake2b(repr((key[0].value, key[1], key[2])).encode("utf-8",
                                 "surrogatepass"), digest_size=8).digest()
        inode = max(int.from_bytes(digest, "big") & _INODE_MASK, pyfuse3.ROOT_INODE + 1)
        while inode in self._by_inode:
            inode = max((inode + 1) & _INODE_MASK, pyfuse3.ROOT_INODE + 1)
        return inode

    def detach(self, kind: NodeKind, owner: str = "", name: str = "") -> Node | None:
        """The object is gone: a new one with the same identity gets a new inode; the old
        node lives on (answering ENOENT or its last content) until forgotten."""
        node = self._by_key.pop((kind, owner, name), None)
        if node is not None:
            node.attached = False
            if node.lookups == 0 and node.kind is not NodeKind.ROOT:
                del self._by_inode[node.inode]
                self._shrink_if_sparse()
        return node

    def move(self, old: NodeKey, new: NodeKey) -> None:
        """The kernel moved a dentry over another: the moved inode now answers to the new
        identity (even another kind: a scratch file renamed over ``threshold``), and the
        replaced one is detached."""
        self.detach(*new)
        node = self._by_key.pop(old, None)
        if node is not None:
            node.kind, node.owner, node.name = new
            self._by_key[new] = node

    def move_owner(self, old: str, new: str) -> None:
        """A saved query was renamed (``mv``): every node of it (its directory, files
        and links) answers to the new key, keeping its inode, as the kernel's dentries
        moved with it. Nested queries move with their own keys."""
        for node in [n for n in self._by_key.values()
                     if n.kind.owner is Owner.QUERY and n.owner == old]:
            self.move(node.key, (node.kind, new, node.name))

    def detach_owner(self, kind: Owner, owner: str) -> list[Node]:
        """Everything of a removed query or ontology (rare: a scan is fine here)."""
        doomed = [n for n in self._by_key.values()
                  if n.owner == owner and n.kind.owner is kind]
        for node in doomed:
            self.detach(node.kind, node.owner, node.name)
        return doomed

    def forget(self, inode: int, count: int) -> None:
        node = self._by_inode.get(inode)
        if node is None or node.kind is NodeKind.ROOT:
            return
        node.lookups = max(0, node.lookups - count)
        if node.lookups == 0:
            del self._by_inode[inode]
            if node.attached:
                self._by_key.pop(node.key, None)
            self._shrink_if_sparse()
