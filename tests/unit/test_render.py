"""Result Markdown front matter and ``.meta/query.toml`` stay parseable whatever they hold."""

from __future__ import annotations

import tomllib

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kg_fuse.client.models import ConceptDetail, ConceptHit, Evidence, Relationship
from kg_fuse.fs.queries.render import concept_markdown
from kg_fuse.fs.queries.saved import SavedQuery
from kg_fuse.fs.tree.meta.status import query_toml
from kg_fuse.listing.thresholds import AutoAdjustment, floor_adjust
from tests.unit.explain import explain_one

HOSTILE = [
    'say "hi"',
    "it's",
    "key: value",
    "---",
    "a\n---\nb",
    "line\nbreak",
    "# not a heading",
    "naïve café",
    "日本語のラベル",
    "😀 emoji 🚀",
    "sep\u2028arator\u2029",
    "next\x85line",
    "tab\there",
    "back\\slash\\",
    "yes",
    "no",
    "null",
    "~",
    "true",
    "1.0",
    "0x1F",
    "- item",
    "[a, b]",
    "{a: b}",
    "&anchor *ref !tag |",
    "%YAML 1.2",
    "'",
    '"',
    "",
    " leading and trailing ",
    "nul\0 and esc\x1b[31m and del\x7f and c1\x9b",
    "bom\ufeff",
    "private\ue000",
]

# Any text except lone surrogates and the two non-characters YAML forbids (tested apart).
label_text = st.text(
    alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\ufffe\uffff")
)


def front_matter(body: bytes) -> dict:
    """The YAML between the opening ``---`` line and the next ``---`` line."""
    lines = body.decode("utf-8").split("\n")
    assert lines[0] == "---"
    end = lines.index("---", 1)
    data = yaml.safe_load("\n".join(lines[1:end]))
    assert isinstance(data, dict)
    return data


def hit(label: str, concept_id: str = "c-1", score: float = 0.8123, docs=("doc-a",)) -> ConceptHit:
    return ConceptHit(concept_id, label, "A description.", score, tuple(docs))


def detail(label: str, ontologies=("onto-1", "onto-2")) -> ConceptDetail:
    return ConceptDetail(
        concept_id="c-1",
        label=label,
        description=f"About {label}\n---\nmore",
        ontologies=tuple(ontologies),
        evidence=(Evidence(quote=f"{label}\n---\n", document=label, paragraph=3),),
        relationships=(Relationship("IMPLIES", "c-2", label, 0.5),),
    )


@pytest.mark.parametrize("label", HOSTILE)
@pytest.mark.parametrize("with_detail", [False, True])
def test_front_matter_round_trips_hostile_labels(label, with_detail):
    body = concept_markdown(
        hit(label, concept_id=label, docs=(label, "plain")), detail(label) if with_detail else None
    )
    data = front_matter(body)
    assert data["id"] == label
    assert data["label"] == label
    assert data["score"] == pytest.approx(0.8123, abs=5e-5)
    expected_ontologies = ["onto-1", "onto-2"] if with_detail else [label, "plain"]
    assert data["ontologies"] == expected_ontologies


@given(label=label_text, concept_id=label_text, ontology=label_text,
       score=st.floats(min_value=0, max_value=1))
def test_front_matter_round_trips_any_label(label, concept_id, ontology, score):
    data = front_matter(concept_markdown(hit(label, concept_id, score, (ontology,)), None))
    assert data["id"] == concept_id
    assert data["label"] == label
    assert data["score"] == pytest.approx(score, abs=5e-5)
    assert data["ontologies"] == [ontology]


def test_detail_ontologies_fall_back_to_the_hit_when_empty():
    data = front_matter(concept_markdown(hit("x", docs=("from-hit",)), detail("x", ())))
    assert data["ontologies"] == ["from-hit"]


def test_signature_shows_as_a_code_line_before_the_description():
    plain = concept_markdown(hit("math.sqrt"), detail("math.sqrt")).decode()
    assert "```" not in plain
    d = ConceptDetail.parse({"concept_id": "c-1", "label": "math.sqrt",
                             "description": "Return the square root of x.",
                             "signature": "sqrt(x,\n /)"})
    body = concept_markdown(hit("math.sqrt"), d).decode()
    assert "# math.sqrt\n\n```\nsqrt(x, /)\n```\n\nReturn the square root of x." in body
    odd = ConceptDetail.parse({"concept_id": "c-1", "label": "x", "signature": 42})
    assert odd.signature == ""  # an extension field never breaks a concept


def test_markdown_shows_the_label_as_one_heading_line():
    body = concept_markdown(hit("two\nlines"), None).decode()
    assert "\n# two lines\n" in body


@pytest.mark.parametrize("label", ["\ufffe", "bad\uffff"])
def test_front_matter_with_yaml_forbidden_noncharacters(label):
    assert front_matter(concept_markdown(hit(label), None))["label"] == label


@pytest.mark.parametrize("label", ["\ud800", "low\udc80"])
def test_markdown_with_lone_surrogate_label_is_utf8(label):
    body = concept_markdown(hit(label), None)
    body.decode("utf-8")


# -- query.toml ---------------------------------------------------------------------------


def render_toml(query: SavedQuery, default: float | None) -> dict:
    return tomllib.loads(query_toml(query, explain_one(query, default)).decode("utf-8"))


@pytest.mark.parametrize("text", HOSTILE + ["nul\0", '"""', "'''", "[table]", "a = 1"])
def test_query_toml_parses_for_hostile_names_and_texts(text):
    query = SavedQuery(path=(text or "n",), text=text, created_at="2024-05-01T10:00:00+00:00")
    doc = render_toml(query, 0.47)
    assert doc["name"] == (text or "n")
    assert doc["query"] == text
    assert doc["threshold"] == "inherit"
    assert doc["created_at"] == "2024-05-01T10:00:00+00:00"
    assert doc["server_default_last_seen"] == 0.47
    assert doc["auto_adjusted"] is False


@given(name=label_text, text=label_text)
def test_query_toml_parses_for_any_text(name, text):
    doc = render_toml(SavedQuery(path=(name,), text=text), 0.47)
    assert doc["name"] == name
    assert doc["query"] == text


def test_query_toml_override():
    doc = render_toml(SavedQuery(("q",), "q", threshold=0.7), 0.47)
    assert doc["threshold"] == 0.7
    assert doc["effective_threshold"] == 0.7
    assert doc["server_default_last_seen"] == 0.47
    assert doc["auto_adjusted"] is False


def test_query_toml_server_default_not_yet_learned():
    doc = render_toml(SavedQuery(("q",), "q"), None)
    assert doc["threshold"] == "inherit"
    assert "server_default_last_seen" not in doc
    assert "effective_threshold" not in doc


def test_query_toml_auto_adjusted_to_a_value():
    adj = floor_adjust(0.95, 0.6, 0.47)
    assert adj is not None
    doc = render_toml(SavedQuery(("q",), "q", threshold=adj.to_value, auto_adjusted=adj), 0.47)
    assert doc["threshold"] == 0.6
    assert doc["auto_adjusted"] is True
    assert doc["auto_adjustment"]["from"] == 0.95
    assert doc["auto_adjustment"]["to"] == 0.6


def test_query_toml_auto_adjusted_back_to_inherit():
    adj = AutoAdjustment(0.95, None, 0.40, 0.47)
    doc = render_toml(SavedQuery(("q",), "q", threshold=None, auto_adjusted=adj), 0.47)
    assert doc["threshold"] == "inherit"
    assert doc["auto_adjusted"] is True
    assert doc["auto_adjustment"]["from"] == 0.95
    assert doc["auto_adjustment"]["to"] == "inherit"
    assert doc["server_default_last_seen"] == 0.47
