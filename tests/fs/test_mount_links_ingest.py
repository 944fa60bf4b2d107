"""Mounted: ontology links in queries, and ingestion by copying files into ingest/."""

from __future__ import annotations

import errno
import os
import shutil
import time

import pytest

from tests.fs.conftest import ServerAdmin
from tests.helpers.mount import Mount, wait_for

pytestmark = pytest.mark.mount

COMPRESSION = "Data Compression and Archiving"
FORMATS = "File Formats"
FAST = ["--ingest-delay", "0.5", "--poll-interval", "1"]
ZEBRA = """# Zebra husbandry

Zebras need wide pastures and careful hoof trimming by a farrier.

## Feeding zebras

Feed zebras hay and fresh grass twice a day.
"""


def results(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))



def ontologies_of(path) -> list[str]:
    import yaml

    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f.read()[4:].partition("\n---\n")[0])["ontologies"]


# -- links ---------------------------------------------------------------------------------

def test_nested_query_inside_a_linked_global_query(mounted: Mount) -> None:
    query = mounted.path("read data from files")
    query.mkdir()
    os.symlink(f"../ontology/{COMPRESSION}", query / "compression")
    nested = query / "open a file"
    nested.mkdir()
    names = results(nested)
    assert names
    assert all(COMPRESSION in ontologies_of(nested / n) for n in names)
    os.symlink(f"../../ontology/{FORMATS}", nested / "formats")  # resolves from its dir
    assert os.readlink(nested / "formats") == f"../../ontology/{FORMATS}"


def test_links_persist_across_a_remount(mount_factory) -> None:
    first = mount_factory()
    first.path("gzip").mkdir()
    os.symlink(f"../ontology/{COMPRESSION}", first.path("gzip", "compression"))
    assert first.unmount() == 0
    second = mount_factory(mountpoint=first.mountpoint, state_of=first)
    assert os.readlink(second.path("gzip", "compression")) == f"../ontology/{COMPRESSION}"


# -- ingestion -----------------------------------------------------------------------------

@pytest.fixture
def farm_server(kg_scratch_server):
    return kg_scratch_server  # not the shared server; each test's ontologies are new


@pytest.fixture
def farm(farm_server, mount_factory, tmp_path):
    admin = ServerAdmin(farm_server)
    mount = mount_factory(server=farm_server, extra_args=FAST,
                          allowed_log=[r"WARNING kg_fuse.fs.queries.ingest"])
    mount.path("ontology", "Farm").mkdir()
    mount.path("ontology", "Zoo").mkdir()
    source = tmp_path / "zebra.md"
    source.write_text(ZEBRA)
    yield mount, source, admin
    for name in ("Farm", "Zoo"):  # with their documents: the next test starts empty
        assert admin.http.delete(f"/ontology/{name}").status_code == 200


def test_copying_a_file_in_ingests_it(farm) -> None:
    mount, source, _ = farm
    ingest = mount.path("ontology", "Farm", "ingest")
    shutil.copy(source, ingest)
    wait_for(lambda: "zebra.md.ingesting" in os.listdir(ingest), what="the job file")
    job = (ingest / "zebra.md.ingesting").read_text()
    assert "ontology: Farm" in job and "status:" in job
    wait_for(lambda: not os.listdir(ingest), what="the job to finish")
    documents = mount.path("ontology", "Farm", "documents")
    assert os.listdir(documents) == ["zebra.md"]
    assert (documents / "zebra.md").read_text() == ZEBRA
    query = mount.path("zebra hoof care")
    query.mkdir()
    assert "Zebra husbandry.concept.md" in results(query)


def test_a_near_duplicate_document_shows_its_warning(farm) -> None:
    """Not an error: the document is stored, and its status says which section repeats."""
    mount, source, _ = farm
    ingest = mount.path("ontology", "Farm", "ingest")
    shutil.copy(source, ingest)
    wait_for(lambda: not os.listdir(ingest), what="the first job to finish")
    (ingest / "zebra notes.md").write_text(
        "# Notes\n\n## Zebra diet\n\nFeed zebras hay and fresh grass twice a day.\n")

    def job_file() -> str:  # appears once the upload starts (after --ingest-delay)
        try:
            return (ingest / "zebra notes.md.ingesting").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    job = wait_for(lambda: "warning:" in (text := job_file()) and text,
                   what="the near-duplicate warning in the job file")
    assert "status: completed" in job and "near-duplicate" in job
    documents = mount.path("ontology", "Farm", "documents")
    assert sorted(os.listdir(documents)) == ["zebra notes.md", "zebra.md"]
    assert os.listxattr(documents / "zebra.md") == []
    assert os.listxattr(documents / "zebra notes.md") == ["user.kg.warnings"]
    status = os.getxattr(documents / "zebra notes.md", "user.kg.warnings").decode()
    assert "near-duplicate" in status and "'Zebra diet'" in status \
        and "'Feeding zebras'" in status
    with pytest.raises(OSError) as missing:
        os.getxattr(documents / "zebra.md", "user.kg.warnings")
    assert missing.value.errno == errno.ENODATA


def test_reading_back_a_file_being_written(farm) -> None:
    mount, _, _ = farm
    path = mount.path("ontology", "Farm", "ingest", "draft.md")
    with open(path, "w") as f:
        f.write("# Draft\n\nfirst part\n")
        f.flush()
        assert path.read_text() == "# Draft\n\nfirst part\n"
        f.write("second part\n")
        f.flush()
        assert path.read_text().endswith("second part\n")
    os.unlink(path)


def test_rm_before_upload_cancels(farm) -> None:
    mount, source, admin = farm
    ingest = mount.path("ontology", "Farm", "ingest")
    shutil.copy(source, ingest)
    os.unlink(ingest / "zebra.md")
    time.sleep(2)
    assert os.listdir(ingest) == []
    assert os.listdir(mount.path("ontology", "Farm", "documents")) == []


def test_mv_between_ontologies_uploads_to_the_destination(farm) -> None:
    mount, source, _ = farm
    shutil.copy(source, mount.path("ontology", "Farm", "ingest"))
    os.rename(mount.path("ontology", "Farm", "ingest", "zebra.md"),
              mount.path("ontology", "Zoo", "ingest", "zebra.md"))
    zoo = mount.path("ontology", "Zoo")
    wait_for(lambda: os.listdir(zoo / "documents"), what="the document in Zoo")
    assert os.listdir(zoo / "documents") == ["zebra.md"]
    assert os.listdir(mount.path("ontology", "Farm", "documents")) == []


def test_editor_temporary_names_are_not_uploaded(farm) -> None:
    mount, _, _ = farm
    ingest = mount.path("ontology", "Farm", "ingest")
    for name in (".zebra.md.swp", "zebra.md~", "4913"):
        (ingest / name).write_text("scratch")
    time.sleep(2)
    assert sorted(os.listdir(ingest)) == sorted([".zebra.md.swp", "zebra.md~", "4913"])
    for name in os.listdir(ingest):
        os.unlink(ingest / name)
    assert os.listdir(mount.path("ontology", "Farm", "documents")) == []


def test_files_above_the_cap_fail_with_efbig(farm) -> None:
    mount, _, _ = farm
    path = mount.path("ontology", "Farm", "ingest", "huge.txt")
    chunk = b"x" * (1024 * 1024)
    with pytest.raises(OSError) as exc, open(path, "wb") as f:
        for _ in range(40):
            f.write(chunk)
        f.flush()
    assert exc.value.errno == errno.EFBIG
    os.unlink(path)


def test_documents_with_the_same_name_or_a_slash_get_unique_valid_names(farm) -> None:
    mount, _, admin = farm
    uploads = [("notes.md", "# Apples\n\nApples are red.\n"),
               ("notes.md", "# Pears\n\nPears are green.\n"),
               ("dir/sub.md", "# Plums\n\nPlums are purple.\n")]
    for filename, text in uploads:
        response = admin.http.post("/ingest", data={"ontology": "Farm", "filename": filename},
                                   files={"file": (filename, text.encode())})
        assert response.status_code == 200, response.text
    documents = mount.path("ontology", "Farm", "documents")
    names = wait_for(lambda: len(os.listdir(documents)) == 3 and os.listdir(documents),
                     what="three documents")
    assert len(set(names)) == 3
    assert all("/" not in n and not n.startswith(".") for n in names)
    contents = sorted((documents / n).read_text() for n in names)
    assert contents == sorted(text for _, text in uploads)
