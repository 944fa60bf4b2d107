"""``.meta/``: the control files, and editors' scratch files next to them; a scratch file
renamed over a control file (``sed -i``, editors) commits it."""

from __future__ import annotations

from kg_fuse.fs.kernel.errnos import NoEntry, NotPermitted
from kg_fuse.fs.kernel.nodes import Node, NodeKind
from kg_fuse.fs.tree.behaviour import Behaviour
from kg_fuse.fs.tree.meta.controls import CONTROLS
from kg_fuse.fs.tree.meta.files import commit
from kg_fuse.fs.tree.mount_tree import Entry, Tree


def _discard_scratch(tree: Tree, meta: Node, name: str) -> None:
    """A replacement of a control by the scratch file ``name`` was refused: the scratch
    file goes too, so a refused ``sed -i`` or ``os.replace`` leaves nothing behind (the
    value stays as it was; a later ``rm`` of the scratch file finds nothing)."""
    tree.scratch.pop(meta.owner, name)
    tree.inodes.detach(NodeKind.SCRATCH_FILE, meta.owner, name)
    tree.kernel.forget_name(meta.inode, name)
    tree.kernel.flush_soon()


class MetaDir(Behaviour):
    """``.meta/``: the control files, and editors' scratch files next to them."""

    is_dir = True

    async def children(self, tree: Tree, node: Node) -> list[Entry]:
        query = tree.query(node)
        return [Entry(n, c.kind, query.key) for n, c in CONTROLS.items()] + [
            Entry(n, NodeKind.SCRATCH_FILE, query.key, n)
            for n in tree.scratch.names(query.key)]

    async def child(self, tree: Tree, node: Node, name: str) -> Node:
        tree.query(node)
        control = CONTROLS.get(name)
        if control is not None:
            return tree.inodes.ensure(control.kind, node.owner)
        if tree.scratch.get(node.owner, name) is None:
            raise NoEntry(name)
        return tree.inodes.ensure(NodeKind.SCRATCH_FILE, node.owner, name)

    async def create(self, tree: Tree, parent: Node, name: str) -> Node:
        if name in CONTROLS:
            raise NotPermitted(f"{name} is a control file")
        tree.query(parent)
        tree.scratch.create(parent.owner, name)
        return tree.inodes.ensure(NodeKind.SCRATCH_FILE, parent.owner, name)

    async def rmdir(self, tree: Tree, node: Node) -> bool:
        return False  # part of its query (rm -r on the way to removing it): accepted

    async def rename(self, tree: Tree, parent: Node, old: str, new_parent: Node,
                     new: str) -> None:
        """``sed -i`` and editors: a scratch file renamed over a control file commits it
        (if valid); the kernel's inode for the scratch file now answers as the control."""
        if new_parent is not parent or old in CONTROLS:
            raise NotPermitted("control files stay where they are")
        content = tree.scratch.get(parent.owner, old)
        if content is None:
            raise NoEntry(old)
        control = CONTROLS.get(new)
        if control is not None:
            try:
                if control.parse is None:
                    raise NotPermitted(f"{new} is read-only")
                await commit(tree, control, parent, control.parse(bytes(content)))
            except Exception:
                _discard_scratch(tree, parent, old)
                raise
            tree.scratch.pop(parent.owner, old)
            new_key = (control.kind, parent.owner, "")
        else:
            tree.scratch.move(parent.owner, old, new)
            new_key = (NodeKind.SCRATCH_FILE, parent.owner, new)
        tree.inodes.move((NodeKind.SCRATCH_FILE, parent.owner, old), new_key)
