"""Mounted: what a user (or an attacker) types cannot hurt the mount or the server.

All-or-nothing ingest, names the server can give and names a user can make, links that
would leave the mount, special files, and deleting documents behind a mount option."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
import unicodedata
from pathlib import Path

import pytest

from kg_fuse.limits import MAX_INGEST_BYTES
from tests.fs.conftest import ServerAdmin
from tests.fs.test_mount_links_ingest import FAST, ZEBRA
from tests.helpers.mount import wait_for

pytestmark = pytest.mark.mount

COMPRESSION = "Data Compression and Archiving"
INGEST_WARNINGS = [r"WARNING kg_fuse.fs.queries.ingest", r"WARNING kg_fuse.fs.kernel.errnos"]


@pytest.fixture(scope="module")
def farm_server(kg_server_clone):
    server = kg_server_clone()  # one copy for this module: some tests change content
    yield server
    server.stop()  # its memory back before the next module's servers start


@pytest.fixture
def farm(farm_server, mount_factory, tmp_path):
    server = farm_server
    admin = ServerAdmin(server)

    def start(*extra: str):
        mount = mount_factory(server=server, extra_args=[*FAST, *extra],
                              allowed_log=INGEST_WARNINGS)
        if not mount.path("ontology", "Farm").exists():
            mount.path("ontology", "Farm").mkdir()
        return mount

    return start, admin, tmp_path


def uploads(admin: ServerAdmin) -> list[str]:
    """The server's log lines of accepted uploads."""
    text = Path(admin.server.log_path).read_text(errors="replace")
    return [line for line in text.splitlines() if " queued " in line]


# -- all-or-nothing ingest ------------------------------------------------------------------


def test_a_copy_that_failed_is_never_uploaded(farm) -> None:
    start, admin, tmp_path = farm
    mount = start()
    ingest = mount.path("ontology", "Farm", "ingest")
    big = tmp_path / "big.txt"
    big.write_bytes(b"x\n" * ((MAX_INGEST_BYTES // 2) + 10))
    result = subprocess.run(["cp", str(big), str(ingest)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and "File too large" in result.stderr
    before = len(uploads(admin))
    time.sleep(2.5)  # well past the 0.5 s ingest delay
    assert len(uploads(admin)) == before  # the first 32 MiB were uploaded before the fix
    job = (ingest / "big.txt.ingesting").read_text()
    assert "status: failed" in job and "not uploaded" in job and "too large" in job
    os.unlink(ingest / "big.txt")  # dismisses its failure too
    assert os.listdir(ingest) == []


def test_renamed_to_a_temporary_name_before_upload_is_never_uploaded(farm) -> None:
    start, admin, tmp_path = farm
    mount = start()
    ingest = mount.path("ontology", "Farm", "ingest")
    before = len(uploads(admin))  # counted before the write: no upload may slip in
    (ingest / "zebra.md").write_text(ZEBRA)
    os.rename(ingest / "zebra.md", ingest / "zebra.md~")
    time.sleep(2)
    assert len(uploads(admin)) == before
    os.unlink(ingest / "zebra.md~")


def test_an_image_is_refused_with_the_servers_reason(farm) -> None:
    start, _, _ = farm
    mount = start()
    ingest = mount.path("ontology", "Farm", "ingest")
    (ingest / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 500)
    job = ingest / "photo.png.ingesting"
    wait_for(lambda: job.exists() and "failed" in job.read_text(), what="the refusal")
    assert "no vision model" in job.read_text()


# -- names ------------------------------------------------------------------------------


def test_an_ontology_named_with_a_slash_keeps_every_ontology_listed(farm) -> None:
    start, admin, _ = farm
    for name in ("a/b", "zz after", "..", ".hidden", "tab\there"):
        assert admin.http.post("/ontology/", json={"name": name}).status_code in (201, 409)
    mount = start()
    names = os.listdir(mount.path("ontology"))  # EIO part-way before the fix
    assert {"a∕b", "zz after", "Farm", COMPRESSION} <= set(names)
    assert len(names) == len(set(names)) and all("/" not in n for n in names)
    assert not any(n in (".", "..") for n in names)
    # it round-trips: its directory works, and ingesting there reaches the real name
    ingest = mount.path("ontology", "a∕b", "ingest")
    (ingest / "zebra.md").write_text(ZEBRA)
    # the job done (its file gone), not only the document listed: its concepts are
    # searchable only then
    wait_for(lambda: not os.listdir(ingest)
             and os.listdir(mount.path("ontology", "a∕b", "documents")),
             what="the ingest job done and the document in a/b")
    scoped = mount.path("ontology", "a∕b", "zebra feeding")
    scoped.mkdir()
    assert any(n.endswith(".concept.md") for n in os.listdir(scoped))


def test_names_show_no_bidi_controls(farm) -> None:
    """An ontology named ``\u202egnp.exe`` was listed with U+202E intact, so it displayed
    reversed (``exe.png``); a document's name and a concept's label could do the same."""
    start, admin, _ = farm
    name = "\u202egnp.exe"
    assert admin.http.post("/ontology/", json={"name": name}).status_code in (201, 409)
    text = ZEBRA.replace("# Zebra husbandry", "# Zebra \u202eyrdnabsuh")
    queued = admin.http.post("/ingest", data={"ontology": name}, files={
        "file": ("\u202edm.sejat\u200b.md", text.encode(), "text/markdown")}).json()
    wait_for(lambda: admin.http.get(f"/jobs/{queued['job_id']}").json()["status"]
             == "completed", what="the ingest job done")
    mount = start()
    scoped = mount.path("ontology", "gnp.exe", "zebra hoof trimming")
    scoped.mkdir()
    shown = {
        "ontologies": os.listdir(mount.path("ontology")),
        "documents": os.listdir(mount.path("ontology", "gnp.exe", "documents")),
        "results": [n for n in os.listdir(scoped) if n.endswith(".concept.md")],
    }
    assert all(shown.values()), shown
    for names in shown.values():
        assert not any(unicodedata.category(c) == "Cf" for n in names for c in n), names
    assert "Zebra yrdnabsuh.concept.md" in shown["results"]


@pytest.mark.parametrize("where", ["", "ontology", "query", "ingest", ".meta"])
def test_names_over_255_bytes_are_enametoolong(farm, where) -> None:
    start, _, _ = farm
    mount = start()
    (mount.path("zlib")).mkdir()
    parent = {"": mount.path(), "ontology": mount.path("ontology"),
              "query": mount.path("zlib"), "ingest": mount.path("ontology", "Farm", "ingest"),
              ".meta": mount.path("zlib", ".meta")}[where]
    fits, too_long = "é" * 127 + "a", "é" * 128  # 255 and 256 bytes of UTF-8
    with pytest.raises(OSError) as exc:
        if where in ("ingest", ".meta"):
            (parent / too_long).write_text("x")
        else:
            (parent / too_long).mkdir()
    assert exc.value.errno == errno.ENAMETOOLONG
    if where in ("ingest", ".meta"):
        (parent / fits).write_text("x")
        os.unlink(parent / fits)
    elif where != "ontology":
        (parent / fits).mkdir()
        assert fits in os.listdir(parent)
        os.rmdir(parent / fits)


@pytest.mark.parametrize("target", ["../../ontology/" + COMPRESSION,
                                    "../../../ontology/" + COMPRESSION])
def test_links_that_would_leave_the_mount_are_refused(farm, target) -> None:
    start, _, _ = farm
    mount = start()
    query = mount.path("zlib")
    query.mkdir()
    with pytest.raises(OSError) as exc:
        os.symlink(target, query / "escape")  # resolves outside the mount
    assert exc.value.errno == errno.EINVAL
    (query / "nested").mkdir()
    os.symlink(target.replace("../../../", "../../"), query / "nested" / "inside")


# -- deleting documents -----------------------------------------------------------------


def test_rm_of_a_document_needs_the_mount_option(farm) -> None:
    start, admin, _ = farm
    mount = start()
    documents = mount.path("ontology", COMPRESSION, "documents")
    victim = sorted(os.listdir(documents))[0]
    with pytest.raises(PermissionError):
        os.unlink(documents / victim)
    assert victim in os.listdir(documents)
    mount.unmount()

    allowed = start("--allow-document-delete")
    documents = allowed.path("ontology", COMPRESSION, "documents")
    query = allowed.path("compress data with gzip")
    query.mkdir()
    (query / ".meta" / "threshold").write_text("0.3\n")
    (query / ".meta" / "limit").write_text("50\n")  # every match: no relevance cut
    before = set(os.listdir(query))
    os.unlink(documents / victim)
    assert victim not in os.listdir(documents)
    assert not (documents / victim).exists()
    wait_for(lambda: set(os.listdir(query)) != before, what="the listing to change")
    with pytest.raises(FileNotFoundError):
        os.unlink(documents / victim)
    shutil.rmtree(query, ignore_errors=True)
