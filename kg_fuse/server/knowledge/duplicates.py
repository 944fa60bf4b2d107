"""Near-duplicate sections (noether): a warning, never an error.

A new concept more than :data:`NEAR_DUPLICATE` similar to one that existed before it was
added is reported in the job's result and kept as its document's status in the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping

from kg_fuse.server.corpus import DocumentSpec
from kg_fuse.server.search.index import ConceptIndex
from kg_fuse.server.storage import reads
from kg_fuse.server.storage.store import Store

#: A new concept more similar than this to an existing one is reported.
NEAR_DUPLICATE = 0.92


def warning(dup: dict) -> str:
    """The one wording of a near-duplicate warning (job result, document status)."""
    return (f"near-duplicate: section {dup['label']!r} is {dup['similarity']:.2f} similar "
            f"to existing concept {dup['similar_label']!r}")


def warnings(found: list[dict]) -> list[str]:
    """The warnings of these near-duplicates, worded once (:func:`warning`)."""
    return [warning(d) for d in found]


def find(store: Store, before: ConceptIndex, index: ConceptIndex,
         new_ids: list[str]) -> list[dict]:
    """New concepts (in ``index``) more than NEAR_DUPLICATE similar to one in ``before``."""
    if not new_ids or not len(before):
        return []
    rows = [index.row_of[c] for c in new_ids if c in index.row_of]
    found = before.nearest(index.matrix[rows])
    pairs = [(index.ids[r], other, sim) for r, (other, sim) in zip(rows, found, strict=True)
             if sim > NEAR_DUPLICATE]
    if not pairs:
        return []
    labels = reads.labels(store, [x for p in pairs for x in p[:2]])
    return [{"concept_id": cid, "label": labels.get(cid, cid), "similar_to": other,
             "similar_label": labels.get(other, other), "similarity": round(sim, 4)}
            for cid, other, sim in pairs]


def by_document(stored: Mapping[str, DocumentSpec], found: list[dict]
                ) -> dict[str, list[dict]]:
    """Each stored document's near-duplicates (by its id): its status in the catalog."""
    out = {}
    for doc_id, doc in stored.items():
        own = {c.id for c in doc.concepts}
        mine = [d for d in found if d["concept_id"] in own]
        if mine:
            out[doc_id] = mine
    return out
