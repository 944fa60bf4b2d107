"""The inode table: stable inodes per identity, kernel-driven lifetime."""

from __future__ import annotations

import pyfuse3

from kg_fuse.fs.kernel.nodes import InodeTable, NodeKind, Owner


def looked_up(table: InodeTable, kind: NodeKind, query: str = "", name: str = "", n: int = 1):
    node = table.ensure(kind, query, name)
    node.lookups += n  # what a kernel lookup does
    return node


def test_root_is_the_fuse_root_inode():
    table = InodeTable()
    assert table.get(pyfuse3.ROOT_INODE) is table.root
    assert table.root.kind.is_dir


def test_ensure_is_stable_for_the_same_key_and_distinct_otherwise():
    table = InodeTable()
    a = table.ensure(NodeKind.RESULT_FILE, "q", "c1")
    assert table.ensure(NodeKind.RESULT_FILE, "q", "c1").inode == a.inode
    others = {
        table.ensure(NodeKind.RESULT_FILE, "q", "c2").inode,
        table.ensure(NodeKind.RESULT_FILE, "q2", "c1").inode,
        table.ensure(NodeKind.QUERY_DIR, "q").inode,
        table.ensure(NodeKind.META_DIR, "q").inode,
    }
    assert a.inode not in others and len(others) == 4
    assert pyfuse3.ROOT_INODE not in others | {a.inode}
    assert table.get(a.inode) is a
    assert table.find(NodeKind.RESULT_FILE, "q", "c1") is a


def test_forget_to_zero_frees_the_node_and_a_new_lookup_keeps_the_inode():
    table = InodeTable()
    node = looked_up(table, NodeKind.RESULT_FILE, "q", "c1", n=2)
    size = len(table)
    table.forget(node.inode, 1)
    assert table.get(node.inode) is node  # one lookup still outstanding
    assert len(table) == size
    table.forget(node.inode, 1)
    assert table.get(node.inode) is None
    assert len(table) == size - 1
    again = table.ensure(NodeKind.RESULT_FILE, "q", "c1")
    assert again is not node
    assert again.inode == node.inode  # the same result keeps its number (ls -i, rsync)


def test_a_detached_identity_recreated_while_the_kernel_holds_it_gets_another_inode():
    table = InodeTable()
    old = looked_up(table, NodeKind.QUERY_DIR, "q")
    table.detach(NodeKind.QUERY_DIR, "q")  # rmdir while a shell still sits in it
    new = table.ensure(NodeKind.QUERY_DIR, "q")  # mkdir again
    assert new.inode != old.inode
    assert table.get(old.inode) is old


def test_forgetting_the_root_or_an_unknown_inode_is_harmless():
    table = InodeTable()
    table.forget(pyfuse3.ROOT_INODE, 10)
    table.forget(987654, 1)
    assert table.get(pyfuse3.ROOT_INODE) is table.root
    assert len(table) == 1


def test_table_stays_bounded_over_many_lookups_and_forgets():
    table = InodeTable()
    for i in range(1000):
        node = looked_up(table, NodeKind.RESULT_FILE, "q", f"c{i}")
        table.forget(node.inode, 1)
    assert len(table) == 1


def test_detached_node_with_lookups_answers_until_forgotten():
    table = InodeTable()
    node = looked_up(table, NodeKind.RESULT_FILE, "q", "c1")
    node.last_body = b"old content"
    table.detach(NodeKind.RESULT_FILE, "q", "c1")
    assert table.get(node.inode) is node
    assert not node.attached
    assert node.last_body == b"old content"
    assert table.find(NodeKind.RESULT_FILE, "q", "c1") is None
    replacement = looked_up(table, NodeKind.RESULT_FILE, "q", "c1")
    assert replacement.inode != node.inode
    table.forget(node.inode, 1)
    assert table.get(node.inode) is None
    # forgetting the old inode does not disturb the new object with the same identity
    assert table.find(NodeKind.RESULT_FILE, "q", "c1") is replacement
    assert table.get(replacement.inode) is replacement


def test_detached_node_without_lookups_is_freed_at_once():
    table = InodeTable()
    node = table.ensure(NodeKind.RESULT_FILE, "q", "c1")
    table.detach(NodeKind.RESULT_FILE, "q", "c1")
    assert table.get(node.inode) is None
    assert len(table) == 1


def test_move_rekeys_and_detaches_the_replaced_node():
    table = InodeTable()
    scratch = looked_up(table, NodeKind.SCRATCH_FILE, "q", ".threshold.swp")
    target = looked_up(table, NodeKind.THRESHOLD_FILE, "q")
    table.move(scratch.key, (NodeKind.THRESHOLD_FILE, "q", ""))
    assert table.find(NodeKind.THRESHOLD_FILE, "q") is scratch
    assert scratch.kind is NodeKind.THRESHOLD_FILE
    assert table.find(NodeKind.SCRATCH_FILE, "q", ".threshold.swp") is None
    assert not target.attached
    assert table.get(target.inode) is target  # the kernel still holds it
    table.forget(target.inode, 1)
    assert table.get(target.inode) is None
    assert table.find(NodeKind.THRESHOLD_FILE, "q") is scratch


def test_detach_query_detaches_everything_under_it():
    table = InodeTable()
    nodes = [
        looked_up(table, NodeKind.QUERY_DIR, "q"),
        looked_up(table, NodeKind.META_DIR, "q"),
        looked_up(table, NodeKind.RESULT_FILE, "q", "c1"),
    ]
    other = looked_up(table, NodeKind.QUERY_DIR, "other")
    namesake = looked_up(table, NodeKind.ONTOLOGY_DIR, "q")  # an ontology called q too
    table.detach_owner(Owner.QUERY, "q")
    assert all(not n.attached for n in nodes)
    assert table.find(NodeKind.QUERY_DIR, "q") is None
    assert table.find(NodeKind.QUERY_DIR, "other") is other
    assert other.attached and namesake.attached


def test_the_tables_memory_comes_back_when_the_kernel_forgets():
    import tracemalloc

    tracemalloc.start()
    try:
        table = InodeTable()
        empty = tracemalloc.get_traced_memory()[0]
        nodes = [looked_up(table, NodeKind.RESULT_FILE, f"q{i % 100}", f"c{i}")
                 for i in range(50_000)]
        assert tracemalloc.get_traced_memory()[0] - empty > 5 * 2**20
        for node in nodes:
            table.forget(node.inode, 1)
        del nodes, node
        assert len(table) == 1
        assert tracemalloc.get_traced_memory()[0] - empty < 256 * 2**10
    finally:
        tracemalloc.stop()
