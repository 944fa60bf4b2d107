"""Making stored concepts searchable: their view texts embedded, their keyword text
indexed, their nearest neighbours linked.

Embedding happens outside the store lock, so a slow batch never stalls readers; the
rows are written by :mod:`kg_fuse.server.storage.writes`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.search import acronyms
from kg_fuse.server.search.index import ConceptIndex
from kg_fuse.server.search.views import embedded_views, split_name, view_texts
from kg_fuse.server.storage import search_rows, writes
from kg_fuse.server.storage.search_rows import StoredConcept
from kg_fuse.server.storage.store import Store
from kg_fuse.server.storage.writes import ConceptText

log = logging.getLogger(__name__)

SIMILAR_NEIGHBOURS = 3
EMBED_STEP = 64  # texts embedded between two checks that an ingest job may go on (~1 s)

#: Append the long forms of the acronyms a concept uses (see :mod:`acronyms`).
EXPAND_ACRONYMS = True


def corpus_acronyms(store: Store) -> dict[str, str]:
    """The acronyms the stored corpus defines in its own text (lower case -> long form)."""
    if not EXPAND_ACRONYMS:
        return {}
    return acronyms.build_map(search_rows.chunk_texts(store))


def _concept_texts(store: Store, concepts: list[StoredConcept]) -> list[ConceptText]:
    """The texts of these concepts, in their order."""
    if not concepts:  # a built store at start: no need to read the corpus's acronyms
        return []
    defined = corpus_acronyms(store)
    evidence = search_rows.evidence_quotes(store, [c.id for c in concepts])
    out = []
    for c in concepts:
        description = acronyms.expand(c.description, f"{c.label} {c.description}", defined)
        views = view_texts(c.label, description, signature=c.signature,
                           examples=c.examples, evidence=evidence.get(c.id, []))
        out.append(ConceptText(c.id, views, split_name(c.label), c.signature,
                               description, views.get("examples", "")))
    return out


def embed_missing(store: Store, embedder: Embedder, progress: bool = False,
                  checkpoint: Callable[[], None] | None = None) -> list[str]:
    """Embed the weighted views of every concept that lacks one; returns their ids.

    Only the views with a fusion weight are embedded (:func:`views.embedded_views`):
    the build costs one model pass per weighted view. A store embedded before views
    existed has its single vector as the description view and is not re-embedded.
    Also indexes their text for keyword search, in the same transaction. ``checkpoint``
    is called between steps of :data:`EMBED_STEP` texts: it raises to stop (an ingest
    job when the server shuts down), and nothing is written then.
    """
    wanted = embedded_views()
    have = search_rows.stored_views(store)
    concepts = _concept_texts(store, search_rows.concepts_lacking_views(store, wanted))
    if not concepts:
        return []
    jobs = [(c.id, view, c.views[view]) for c in concepts for view in wanted
            if view in c.views and view not in have[c.id]]
    # Similar lengths in a batch mean less padding: about twice as fast on CPU.
    jobs.sort(key=lambda j: len(j[2]))
    log.info("embedding %d views of %d concepts with %s", len(jobs), len(concepts),
             embedder.name)
    vectors = _embed(embedder, [text for _, _, text in jobs], progress, checkpoint)
    writes.save_views(store, embedder.name, [
        (cid, view, np.ascontiguousarray(v, np.float32).tobytes())
        for (cid, view, _), v in zip(jobs, vectors, strict=True)], concepts)
    return [c.id for c in concepts]


def _embed(embedder: Embedder, texts: list[str], progress: bool,
           checkpoint: Callable[[], None] | None) -> np.ndarray:
    """All ``texts`` at once (start-up: one progress bar), or in steps with a check before
    each (an ingest job)."""
    if checkpoint is None:
        return embedder.encode(texts, progress=progress)
    parts = []
    for start in range(0, len(texts), EMBED_STEP):
        checkpoint()
        parts.append(embedder.encode(texts[start:start + EMBED_STEP]))
    return np.concatenate(parts) if parts else embedder.encode([])


def index_missing_text(store: Store) -> int:
    """Keyword-index concepts embedded before the keyword index existed."""
    concepts = _concept_texts(store, search_rows.concepts_lacking_text(store))
    if concepts:
        writes.save_text(store, concepts)
        log.info("indexed the text of %d concepts for keyword search", len(concepts))
    return len(concepts)


def link_similar(store: Store, index: ConceptIndex, concept_ids: list[str],
                 k: int = SIMILAR_NEIGHBOURS) -> int:
    """SIMILAR_TO edges to each concept's k nearest neighbours, cosine as confidence."""
    neighbours = index.nearest_neighbours(concept_ids, k)
    edges = [(cid, other, score) for cid, near in neighbours.items() for other, score in near]
    if edges:
        writes.add_similar(store, edges)
    return len(edges)
