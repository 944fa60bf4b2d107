"""Mounted: ontologies, documents, scoped and nested queries, and the list controls."""

from __future__ import annotations

import errno
import os
import tomllib

import pytest

from kg_fuse.fs.queries import DEFAULT_LIMIT
from tests.fs.conftest import ServerAdmin
from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

COMPRESSION = "Data Compression and Archiving"


def results(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))


def front_matter(path) -> dict:
    import yaml

    with open(path, encoding="utf-8") as f:
        text = f.read()
    return yaml.safe_load(text[4:].partition("\n---\n")[0])


def ids(directory) -> set[str]:
    return {front_matter(os.path.join(directory, n))["id"] for n in results(directory)}


def settings(directory) -> dict:
    return tomllib.loads(open(os.path.join(directory, ".meta", "query.toml")).read())


def write_fails_einval(path, data: str) -> None:
    with pytest.raises(OSError) as exc, open(path, "w") as f:
        f.write(data)
        f.flush()
    assert exc.value.errno == errno.EINVAL


# -- ontologies and documents ---------------------------------------------------------

def test_ontology_lists_every_ontology_and_its_documents(mounted: Mount, kg_admin) -> None:
    listed = sorted(os.listdir(mounted.path("ontology")))
    catalog = kg_admin.http.get("/catalog/children", params={"limit": 1000}).json()
    assert listed == sorted(n["name"] for n in catalog["nodes"])
    ontology = mounted.path("ontology", COMPRESSION)
    assert sorted(os.listdir(ontology)) == ["documents", "ingest"]
    documents = sorted(os.listdir(ontology / "documents"))
    assert "gzip" in documents and "tarfile" in documents
    text = (ontology / "documents" / "gzip").read_text()
    assert "def compress(" in text  # the module's own source, not a reconstruction
    for name in documents:
        path = ontology / "documents" / name
        assert os.stat(path).st_size == len(path.read_bytes())


def test_six_hundred_ontologies_are_all_listed(kg_server_clone, mount_factory) -> None:
    server = kg_server_clone()
    admin = ServerAdmin(server)
    names = [f"bulk {i:04d}" for i in range(620)]
    for name in names:
        assert admin.http.post("/ontology/", json={"name": name}).status_code == 201
    mount = mount_factory(server=server)
    listed = set(os.listdir(mount.path("ontology")))
    assert set(names) <= listed


def test_mkdir_ontology_creates_it_and_existing_is_eexist(kg_server_clone, mount_factory):
    server = kg_server_clone()
    mount = mount_factory(server=server)
    name = "Notes? #1 %2F ünï"
    mount.path("ontology", name).mkdir()
    assert name in os.listdir(mount.path("ontology"))
    assert ServerAdmin(server).http.get(
        "/ontology/" + __import__("urllib.parse").parse.quote(name, safe="")).status_code == 200
    with pytest.raises(FileExistsError):
        mount.path("ontology", name).mkdir()
    with pytest.raises(PermissionError):
        os.rmdir(mount.path("ontology", name))
    assert name in os.listdir(mount.path("ontology"))


def test_rmdir_ontology_with_the_mount_option_deletes_it(kg_server_clone, mount_factory):
    server = kg_server_clone()
    mount = mount_factory(server=server, extra_args=["--allow-ontology-delete"])
    mount.path("ontology", "Scratch").mkdir()
    os.rmdir(mount.path("ontology", "Scratch"))
    assert "Scratch" not in os.listdir(mount.path("ontology"))


# -- scoped and nested queries ----------------------------------------------------------

def test_scoped_query_lists_only_that_ontologys_concepts(mounted: Mount) -> None:
    scoped = mounted.path("ontology", COMPRESSION, "read data from files")
    scoped.mkdir()
    names = results(scoped)
    assert names
    for name in names:
        assert COMPRESSION in front_matter(scoped / name)["ontologies"]
    mounted.path("read data from files").mkdir()
    everywhere = {front_matter(mounted.path("read data from files", n))["ontologies"][0]
                  for n in results(mounted.path("read data from files"))}
    assert len(everywhere) > 1  # the global query is not restricted
    assert settings(scoped)["ontology"] == COMPRESSION


def test_nested_query_lists_concepts_matching_both_terms(mounted: Mount, kg_admin) -> None:
    parent = mounted.path("read data from files")
    parent.mkdir()
    child = parent / "compressed archives"
    child.mkdir()
    nested = ids(child)
    assert nested
    default = kg_admin.get_default()
    both = {r["concept_id"] for r in kg_admin.search("read data from files", limit=100)["results"]}
    sub = {r["concept_id"] for r in kg_admin.search("compressed archives", limit=100)["results"]}
    assert nested <= both & sub
    for name in results(child):
        assert front_matter(child / name)["score"] >= default - 1e-6
    assert settings(child)["parent"] == "read data from files"


def test_each_level_uses_its_own_threshold(mounted: Mount) -> None:
    parent = mounted.path("read data from files")
    parent.mkdir()
    child = parent / "compressed archives"
    child.mkdir()
    before = results(child)
    (parent / ".meta" / "threshold").write_text("0.99\n")
    assert results(child) == []  # the parent level now matches nothing
    (parent / ".meta" / "threshold").write_text("inherit\n")
    (child / ".meta" / "threshold").write_text("0.2\n")
    assert len(results(child)) >= len(before)


def meta_status(query) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in
                (query / ".meta" / "status").read_text().splitlines())


def test_a_nested_query_s_status_names_the_parent_threshold_as_the_filter(
        mounted: Mount) -> None:
    parent = mounted.path("read data from files")
    parent.mkdir()
    child = parent / "compressed archives"
    child.mkdir()
    (parent / ".meta" / "threshold").write_text("0.99\n")
    assert results(child) == []
    status = meta_status(child)
    assert status["results"] == "0"
    assert status["filtered by"].startswith(
        "level 1, the enclosing query 'read data from files' at 0.99 (override): none of "
        "this query's")
    assert status["level 1"].startswith("0.99 (own value) for 'read data from files', the "
                                        "enclosing query")
    assert "(server default) for 'compressed archives', this query" in status["level 2"]
    levels = settings(child)["levels"]
    assert [(lv["role"], lv["threshold"]) for lv in levels][0] == ("enclosing query", 0.99)
    threshold_text = (child / ".meta" / "threshold").read_text()
    assert "# Also filtered by the enclosing query 'read data from files': 0.99" \
        in threshold_text


def test_the_readme_nested_example_explains_its_listing(mounted: Mount) -> None:
    parent = mounted.path("compress data with gzip")
    parent.mkdir()
    child = parent / "read"
    child.mkdir()
    names = results(child)
    status = meta_status(child)
    assert status["results"] == str(len(names))
    assert "level 1" in status and "level 2" in status
    if not names:  # empty: the status says which threshold emptied it
        assert "filtered by" in status


def test_rmdir_of_a_query_with_nested_queries_is_enotempty(mounted: Mount) -> None:
    mounted.path("json").mkdir()
    mounted.path("json", "decode").mkdir()
    with pytest.raises(OSError) as exc:
        os.rmdir(mounted.path("json"))
    assert exc.value.errno == errno.ENOTEMPTY
    os.rmdir(mounted.path("json", "decode"))
    os.rmdir(mounted.path("json"))


# -- limit, exclude, union ------------------------------------------------------------------

def test_limit_above_a_page_pages_through(mounted: Mount) -> None:
    query = mounted.path("files@0")
    query.mkdir()
    assert len(results(query)) == 50
    (query / ".meta" / "limit").write_text("250\n")
    assert len(results(query)) == 250
    assert settings(query)["limit"] == 250
    (query / ".meta" / "limit").write_text("default\n")
    assert len(results(query)) == 50


@pytest.mark.parametrize("bad", ["0", "1001", "abc", "12 13", "-5", "2.5"])
def test_invalid_limits_are_refused(mounted: Mount, bad: str) -> None:
    query = mounted.path("files")
    query.mkdir()
    (query / ".meta" / "limit").write_text("20\n")
    write_fails_einval(query / ".meta" / "limit", bad)
    assert settings(query)["limit"] == 20


def test_exclude_replace_append_clear_and_effect(mounted: Mount) -> None:
    query = mounted.path("compress data with gzip")
    query.mkdir()
    exclude = query / ".meta" / "exclude"
    before = results(query)
    assert "bz2.compress.concept.md" in before
    exclude.write_text("bz2 compression\n")
    assert exclude.read_text() == "bz2 compression\n"
    with open(exclude, "a") as f:
        f.write("lzma compression\n")
    assert exclude.read_text() == "bz2 compression\nlzma compression\n"
    exclude.write_text("bz2 compression\n")  # '>' replaces the list
    assert exclude.read_text() == "bz2 compression\n"
    after = results(query)
    assert "bz2.compress.concept.md" not in after
    assert set(before) - set(after)  # the excluded concepts are gone
    # Nothing new appears, except from below the limit when the listing was full.
    assert set(after) < set(before) or len(before) == DEFAULT_LIMIT
    os.truncate(exclude, 0)
    assert exclude.read_text() == ""
    assert results(query) == before
    assert settings(query)["exclude"] == []


def test_union_adds_the_matches_of_each_term(mounted: Mount) -> None:
    query = mounted.path("compress data with gzip")
    query.mkdir()
    assert not any(n.startswith("csv.") for n in results(query))
    (query / ".meta" / "union").write_text("read and write CSV files\n")
    assert any(n.startswith("csv.") for n in results(query))
    assert settings(query)["union"] == ["read and write CSV files"]


@pytest.mark.parametrize("bad", ["tab\there\n", "x" * 501 + "\n", "bell\x07\n"])
def test_invalid_terms_are_refused(mounted: Mount, bad: str) -> None:
    query = mounted.path("gzip")
    query.mkdir()
    (query / ".meta" / "exclude").write_text("keep me\n")
    write_fails_einval(query / ".meta" / "exclude", bad)
    assert (query / ".meta" / "exclude").read_text() == "keep me\n"


# -- status and xattrs --------------------------------------------------------------------

def test_status_explains_an_empty_gibberish_directory(mounted: Mount, kg_admin) -> None:
    expected = kg_admin.search("qwertyuiop")
    assert expected["count"] == 0 and expected["suggested_threshold"] is not None
    query = mounted.path("qwertyuiop")
    query.mkdir()
    assert results(query) == []
    status = dict(line.split(": ", 1) for line in
                  (query / ".meta" / "status").read_text().splitlines())
    assert status["results"] == "0"
    assert status["effective threshold"].endswith("(server default)")
    assert float(status["suggested threshold"]) == expected["suggested_threshold"]
    assert status["best near miss"].startswith(expected["top_match"]["label"])
    assert status["below threshold"] == str(expected["below_threshold_count"])
    assert "(fresh)" in status["fetched"]
    assert expected["suggested_threshold"] < kg_admin.get_default()
    assert "to .meta/threshold" in status["hint"]


def test_result_files_carry_score_and_concept_id_xattrs(mounted: Mount) -> None:
    query = mounted.path("compress data with gzip")
    query.mkdir()
    path = query / "gzip.compress.concept.md"
    assert set(os.listxattr(path)) == {"user.kg.score", "user.kg.concept_id"}
    meta = front_matter(path)
    assert os.getxattr(path, "user.kg.concept_id").decode() == meta["id"]
    assert float(os.getxattr(path, "user.kg.score")) == pytest.approx(meta["score"], abs=1e-4)
