"""The behaviour table: one ``Behaviour`` per node kind, the way ``meta.controls.CONTROLS``
is one ``Control`` per control file. The FUSE operations look a node's behaviour up here
instead of branching over kinds."""

from __future__ import annotations

from kg_fuse.fs.kernel.nodes import Node, NodeKind
from kg_fuse.fs.tree import directories, files
from kg_fuse.fs.tree.behaviour import Behaviour
from kg_fuse.fs.tree.meta.controls import CONTROLS
from kg_fuse.fs.tree.meta.directory import MetaDir
from kg_fuse.fs.tree.meta.files import ControlFile, ScratchFile

BEHAVIOURS: dict[NodeKind, Behaviour] = {
    NodeKind.ROOT: directories.Root(),
    NodeKind.ONTOLOGY_ROOT: directories.OntologyRoot(),
    NodeKind.ONTOLOGY_DIR: directories.OntologyDir(),
    NodeKind.DOCUMENTS_DIR: directories.DocumentsDir(),
    NodeKind.DOCUMENT_FILE: files.DocumentFile(),
    NodeKind.INGEST_DIR: directories.IngestDir(),
    NodeKind.INGEST_FILE: files.IngestFile(),
    NodeKind.JOB_FILE: files.JobFile(),
    NodeKind.QUERY_DIR: directories.QueryDir(),
    NodeKind.META_DIR: MetaDir(),
    **{control.kind: ControlFile(control) for control in CONTROLS.values()},
    NodeKind.SCRATCH_FILE: ScratchFile(),
    NodeKind.RESULT_FILE: files.ResultFile(),
    NodeKind.LINK: files.LinkFile(),
}


def behaviour(node: Node) -> Behaviour:
    return BEHAVIOURS[node.kind]
