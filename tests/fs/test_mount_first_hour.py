"""Mounted: what a new user notices in the first hour (issue: the first hour).

rm -r of a saved query, . and .., best-first listings with ls -U, refusing a non-empty
mountpoint, real times in ingest/ and documents/, a duplicate ingest that says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tests.fs.conftest import ServerAdmin
from tests.helpers.mount import Mount, wait_for

pytestmark = pytest.mark.mount

RELEVANT = "compress data with gzip"
FAST = ["--ingest-delay", "0.5", "--poll-interval", "1"]
NOTES = "# Sourdough\n\nFeed the starter the night before baking.\n"


def results(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(".concept.md")]



def test_rm_r_removes_a_saved_query_quietly(mounted: Mount) -> None:
    query = mounted.path(RELEVANT)
    query.mkdir()
    (query / "levels").mkdir()
    (query / ".meta" / "threshold").write_text("0.5\n")
    assert results(query)
    done = subprocess.run(["rm", "-r", str(query)], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stderr) == (0, "")
    assert RELEVANT not in os.listdir(mounted.mountpoint)
    query.mkdir()  # a new query of that name starts afresh: the old override is gone
    assert "inherit" in (query / ".meta" / "threshold").read_text().splitlines()[-1]


def test_rm_of_one_result_changes_nothing(mounted: Mount) -> None:
    query = mounted.path(RELEVANT)
    query.mkdir()
    before = sorted(results(query))
    os.unlink(query / before[0])
    assert sorted(results(query)) == before


def test_ls_a_shows_dot_and_dotdot(mounted: Mount) -> None:
    query = mounted.path(RELEVANT)
    query.mkdir()
    for directory in (mounted.mountpoint, query, query / ".meta",
                      mounted.path("ontology")):
        listing = subprocess.run(["ls", "-a", str(directory)], capture_output=True,
                                 text=True, check=True, timeout=60).stdout.split("\n")
        assert listing[:2] == [".", ".."], (directory, listing)
    long = subprocess.run(["ls", "-la", str(query)], capture_output=True, text=True,
                          check=True, timeout=60).stdout
    assert " .\n" in long and " ..\n" in long
    assert os.stat(query / ".").st_ino == os.stat(query).st_ino
    assert os.stat(query / "..").st_ino == os.stat(mounted.mountpoint).st_ino


def test_ls_U_lists_results_best_first(mounted: Mount) -> None:
    query = mounted.path("compression")  # a broad query: a dozen close matches
    query.mkdir()
    listed = subprocess.run(["ls", "-U", str(query)], capture_output=True, text=True,
                            check=True, timeout=60).stdout.split()
    names = [n for n in listed if n.endswith(".concept.md")]
    assert len(names) >= 3
    scores = [float(os.getxattr(query / n, "user.kg.score")) for n in names]
    assert scores == sorted(scores, reverse=True)
    assert names != sorted(names)  # plain ls (by name) would not show this order


def test_a_non_empty_mountpoint_is_refused_unless_nonempty(mount_factory, kg_server,
                                                           tmp_path) -> None:
    target = tmp_path / "full"
    target.mkdir()
    (target / "mine.txt").write_text("keep me")
    env = {**os.environ, **kg_server.env}
    refused = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "mount", str(target)],
                             env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "not empty" in refused.stderr and "--nonempty" in refused.stderr
    assert not os.path.ismount(target)
    mount = mount_factory(mountpoint=target, extra_args=["--nonempty"])
    assert "ontology" in os.listdir(mount.mountpoint)
    mount.unmount()
    assert (target / "mine.txt").read_text() == "keep me"


@pytest.fixture
def recipes_server(kg_scratch_server):
    return kg_scratch_server  # not the shared server; each test's ontology is new


@pytest.fixture
def recipes(recipes_server, mount_factory):
    mount = mount_factory(server=recipes_server, extra_args=FAST,
                          allowed_log=[r"WARNING kg_fuse.fs.queries.ingest"])
    mount.path("ontology", "Recipes").mkdir()
    yield mount
    admin = ServerAdmin(recipes_server)  # with its documents: the next test starts empty
    assert admin.http.delete("/ontology/Recipes").status_code == 200


def test_ingest_and_documents_carry_real_times(recipes: Mount, tmp_path) -> None:
    mounted_at = time.time()
    time.sleep(1.5)  # so a file stamped with the mount's start time would be caught
    source = tmp_path / "notes.md"
    source.write_text(NOTES)
    ingest = recipes.path("ontology", "Recipes", "ingest")
    copied_at = time.time()
    shutil.copy(source, ingest)
    assert os.stat(ingest / "notes.md").st_mtime >= copied_at - 0.5
    documents = recipes.path("ontology", "Recipes", "documents")
    wait_for(lambda: "notes.md" in os.listdir(documents), what="the document")
    stored = os.stat(documents / "notes.md").st_mtime
    assert stored >= copied_at - 0.5 and stored > mounted_at + 1


def test_a_duplicate_ingest_says_so(recipes: Mount, tmp_path) -> None:
    source = tmp_path / "notes.md"
    source.write_text(NOTES)
    ingest = recipes.path("ontology", "Recipes", "ingest")
    documents = recipes.path("ontology", "Recipes", "documents")
    shutil.copy(source, ingest)
    wait_for(lambda: "notes.md" in os.listdir(documents), what="the first ingest")
    wait_for(lambda: not os.listdir(ingest), what="the first job to finish")
    shutil.copy(source, ingest)
    job = ingest / "notes.md.ingesting"
    wait_for(lambda: job.exists() and "duplicate" in job.read_text(), what="the duplicate")
    text = job.read_text()
    assert "status: duplicate" in text and "already holds" in text
    time.sleep(2)  # it stays until dismissed
    assert job.exists()
    os.unlink(job)
    assert os.listdir(ingest) == []


def test_unmount_of_a_busy_mount_says_why_in_one_line(mounted: Mount) -> None:
    inside = subprocess.Popen(["sleep", "60"], cwd=mounted.mountpoint)
    try:
        busy = subprocess.run([sys.executable, "-m", "kg_fuse.cli", "unmount",
                               str(mounted.mountpoint)], env=mounted.env, capture_output=True,
                              text=True, timeout=60)
        assert busy.returncode == 1
        lines = busy.stderr.strip().splitlines()
        assert len(lines) == 1 and "busy" in lines[0] and "cd out" in lines[0], lines
        assert os.path.ismount(mounted.mountpoint)
    finally:
        inside.kill()
        inside.wait()


def test_the_same_file_copied_into_a_second_ontology_is_ingested_there(
        recipes: Mount, recipes_server, tmp_path) -> None:
    source = tmp_path / "notes.md"
    source.write_text(NOTES)
    shutil.copy(source, recipes.path("ontology", "Recipes", "ingest"))
    wait_for(lambda: "notes.md" in os.listdir(recipes.path("ontology", "Recipes", "documents")),
             what="the first ingest")
    recipes.path("ontology", "Baking").mkdir()
    try:
        ingest = recipes.path("ontology", "Baking", "ingest")
        shutil.copy(source, ingest)
        wait_for(lambda: not os.listdir(ingest), what="the second job to finish")  # no dup
        documents = recipes.path("ontology", "Baking", "documents")
        wait_for(lambda: "notes.md" in os.listdir(documents), what="the copy listed")
        assert (documents / "notes.md").read_text() == NOTES
        scoped = recipes.path("ontology", "Baking", "feed the starter")
        scoped.mkdir()
        assert results(scoped)
        assert "notes.md" in os.listdir(recipes.path("ontology", "Recipes", "documents"))
    finally:
        admin = ServerAdmin(recipes_server)
        assert admin.http.delete("/ontology/Baking").status_code == 200
