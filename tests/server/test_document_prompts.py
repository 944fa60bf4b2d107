"""Which prompt a model's documents and queries get, for each shape of its
``config_sentence_transformers.json`` ``prompts``, against the installed
sentence-transformers.

kg-fuse puts before a document the prompt the model names for documents (``document``,
else ``passage``, else ``corpus``), and before a query its ``query`` prompt. That is what
sentence-transformers' ``encode_query`` and ``encode_document`` pick, with one
exception: sentence-transformers 6 adds an empty ``document`` prompt to a model that
names only ``query`` and ``passage`` (e5's shape), so its ``encode_document`` puts
nothing before a document, while the model was trained with ``passage: `` there (its
card says so, ``encode(prompt_name="passage")`` uses it, and sentence-transformers 5's
``encode_document`` did too). kg-fuse keeps ``passage: `` (docs/server.md, "Models")."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from kg_fuse.server.embedding.folder import read_folder
from kg_fuse.server.embedding.models import builtin_folder

st = pytest.importorskip("sentence_transformers")

#: shape -> (the config's prompts, the query prompt and the document prompt kg-fuse uses)
SHAPES = {
    "query and passage": ({"query": "query: ", "passage": "passage: "}, "query: ", "passage: "),
    "query and document": ({"query": "query: ", "document": "doc: "}, "query: ", "doc: "),
    "query only": ({"query": "query: "}, "query: ", ""),
    "none": (None, "", ""),
}


def _folder(where: Path, prompts: dict[str, str] | None) -> Path:
    """The built-in model's folder with these prompts (its other files linked)."""
    source = builtin_folder()
    where.mkdir()
    for item in source.iterdir():
        if item.name != "config_sentence_transformers.json":
            (where / item.name).symlink_to(item)
    settings = json.loads((source / "config_sentence_transformers.json").read_text())
    settings.pop("prompts", None)
    if prompts is not None:
        settings["prompts"] = prompts
    (where / "config_sentence_transformers.json").write_text(json.dumps(settings))
    return where


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_config_shape_gets_the_prompts_its_model_was_trained_with(
        tmp_path: Path, shape: str) -> None:
    prompts, query, document = SHAPES[shape]
    folder = _folder(tmp_path / "model", prompts)
    ours = read_folder(folder).prompts
    assert (ours.query, ours.document) == (query, document)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = st.SentenceTransformer(str(folder), device="cpu")
    texts = ["gzip compression of a file"]
    # queries: what encode_query puts before them, whatever the version
    assert reference.prompts.get("query", "") == query
    # documents: the prompt the model names for them, as encode() with that name uses
    named = next((n for n in ("document", "passage", "corpus") if n in (prompts or {})),
                 None)
    assert (reference.prompts[named] if named else "") == document
    picked = reference.encode_document(texts)
    as_named = reference.encode(texts, prompt=document)
    same = float((picked @ as_named.T).item() / (
        (picked @ picked.T).item() ** 0.5 * (as_named @ as_named.T).item() ** 0.5))
    injected = reference.prompts.get("document") == "" and named == "passage"
    if injected:  # sentence-transformers 6: its own empty 'document' prompt wins
        assert same < 0.999, "encode_document now uses the passage prompt: update the docs"
    else:
        assert same == pytest.approx(1.0, abs=1e-5)
