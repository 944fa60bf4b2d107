"""Evidence quotes say where they come from: two paragraphs never share one location."""

from __future__ import annotations

from kg_fuse.client.models import ConceptDetail
from kg_fuse.fs.queries.render import evidence_location

SECTION = ("## Proofing\n\nSourdough needs a long, cold proof.\n\n"
           "Shape the loaf   before\nthe final rise.\n\nBake hot.\n")


def detail(*quotes: str, full_text: str = SECTION) -> ConceptDetail:
    return ConceptDetail.parse({
        "concept_id": "c_1", "label": "Proofing", "description": "",
        "instances": [{"quote": q, "document": "Recipes", "paragraph": 8,
                       "source_id": "s8", "full_text": full_text, "filename": "notes.md"}
                      for q in quotes],
    })


def test_quotes_from_different_paragraphs_of_one_chunk_differ() -> None:
    first, second = detail("Sourdough needs a long, cold proof.",
                           "Shape the loaf before the final rise.").evidence
    assert evidence_location(first) == ", section 8, paragraph 2"
    assert evidence_location(second) == ", section 8, paragraph 3"  # whitespace-insensitive


def test_a_chunk_of_one_paragraph_or_without_text_names_only_the_section() -> None:
    (alone,) = detail("Bake hot.", full_text="Bake hot.").evidence
    (no_text,) = detail("Bake hot.", full_text="").evidence
    assert evidence_location(alone) == evidence_location(no_text) == ", section 8"
