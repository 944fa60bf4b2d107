"""Start-up: build whatever the store lacks, load the index, measure the store's model
once (its score scale and grade), calibrate if needed.

A restart reuses the store: nothing is re-embedded and a stored default is kept.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from kg_fuse.memory import give_memory_back
from kg_fuse.server.corpus import DocumentSpec
from kg_fuse.server.corpus.markdown import read_folder
from kg_fuse.server.corpus.stdlib import STDLIB_MARKER_KEY, stdlib_docs_to_store
from kg_fuse.server.knowledge import indexing
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.startup import model_grade
from kg_fuse.server.storage import writes
from kg_fuse.server.threshold import calibrate

log = logging.getLogger(__name__)


def prepare(graph: KnowledgeGraph, corpus: str = "stdlib", modules: list[str] | None = None,
            ingest: list[Path] | None = None, ontology: str | None = None,
            progress: bool = True) -> None:
    """Build whatever the store lacks, load the index, measure the model if it was not,
    calibrate if needed."""
    store = graph.store
    docs: list[DocumentSpec] = []
    marker = None
    if corpus == "stdlib":
        marker, stdlib_docs = stdlib_docs_to_store(
            store.get_json_setting(STDLIB_MARKER_KEY), modules)
        docs += stdlib_docs
    for folder in ingest or []:
        docs += read_folder(folder, ontology)
    with graph.changes.lock:
        if dropped := writes.delete_unpublished(store):
            log.warning("took out %d documents an ingest stopped in its middle left "
                        "unlisted: its job says to upload them again", dropped)
        writes.write_documents(store, docs)
        if marker is not None:
            store.set_setting(STDLIB_MARKER_KEY, json.dumps(marker))
        embedded = indexing.embed_missing(store, graph.embedder, progress=progress)
        indexing.index_missing_text(store)
        graph.reload_index()
        if embedded:
            log.info("embedded %d new concepts; linking nearest neighbours", len(embedded))
            indexing.link_similar(store, graph.index, embedded)
        else:
            log.info("index is up to date: %d concepts, nothing to embed", len(graph.index))
    measured, now = graph.model.measure()  # once per store and model: the default's scale
    if now:
        model_grade.remember(graph.model.spec, measured.grade)
    if len(graph.index):
        graph.threshold.recalibrate_if_drifted()
    elif graph.threshold.stored() is None:
        log.info("no concepts to calibrate against; the fallback %.2f applies until "
                 "there is content", calibrate.FALLBACK_THRESHOLD)
    give_memory_back()  # checking the store freed ~30 MiB glibc would keep
