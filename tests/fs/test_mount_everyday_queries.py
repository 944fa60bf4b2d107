"""Mounted: everyday tools on saved queries. ``mv`` renames a query and keeps its
settings, ``touch`` says EPERM instead of exiting 0 and changing nothing, a refused
rename onto a control file leaves no scratch file behind, and ``ls -U`` shows the best
result first."""

from __future__ import annotations

import errno
import os
import subprocess
import tomllib

import pytest

from tests.helpers.mount import Mount

pytestmark = pytest.mark.mount

OLD = "read data from files"
NEW = "write data to files"
COMPRESSION = "Data Compression and Archiving"


def sh(command: str, cwd) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def settings(directory) -> dict:
    return tomllib.loads((directory / ".meta" / "query.toml").read_text())


def results(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".concept.md"))


def configure(query) -> None:
    """Every setting a query can have."""
    (query / ".meta" / "threshold").write_text("0.3\n")
    (query / ".meta" / "limit").write_text("7\n")
    (query / ".meta" / "exclude").write_text("bz2 compression\n")
    (query / ".meta" / "union").write_text("read and write CSV files\n")
    (query / "compressed").mkdir()
    (query / "compressed" / ".meta" / "threshold").write_text("0.25\n")
    os.symlink(f"../ontology/{COMPRESSION}", query / "compression")


def kept(query, text: str) -> None:
    doc = settings(query)
    assert doc["query"] == text and doc["name"] == query.name
    assert (doc["threshold"], doc["limit"]) == (0.3, 7)
    assert (doc["exclude"], doc["union"]) == (["bz2 compression"], ["read and write CSV files"])
    assert [link["name"] for link in doc["links"]] == ["compression"]
    assert os.readlink(query / "compression") == f"../ontology/{COMPRESSION}"
    nested = settings(query / "compressed")
    assert nested["threshold"] == 0.25 and nested["parent"] == query.name


# -- mv ------------------------------------------------------------------------------------

def test_mv_renames_a_query_and_keeps_every_setting_across_a_remount(mount_factory) -> None:
    first = mount_factory()
    first.path(OLD).mkdir()
    configure(first.path(OLD))
    done = sh(f'mv "{OLD}" "{NEW}"', first.mountpoint)
    assert done.returncode == 0, done.stderr
    assert OLD not in os.listdir(first.mountpoint) and not first.path(OLD).exists()
    kept(first.path(NEW), NEW)
    assert first.unmount() == 0
    second = mount_factory(mountpoint=first.mountpoint, state_of=first)
    assert OLD not in os.listdir(second.mountpoint)
    kept(second.path(NEW), NEW)


def test_the_listing_of_a_renamed_query_follows_its_new_text(mounted: Mount) -> None:
    old, new = mounted.path("compress data with gzip"), mounted.path("sort a list")
    old.mkdir()
    before = results(old)
    os.rename(old, new)
    mounted.path("sort a list@exact").mkdir()  # the same text, listed afresh
    (mounted.path("sort a list@exact") / ".meta" / "threshold").write_text("inherit\n")
    assert results(new) == results(mounted.path("sort a list@exact"))
    assert results(new) != before
    assert "query: sort a list" in (new / ".meta" / "status").read_text()


def test_a_nested_query_is_renamed_in_place(mounted: Mount) -> None:
    parent = mounted.path(OLD)
    parent.mkdir()
    (parent / "compressed").mkdir()
    (parent / "compressed" / ".meta" / "limit").write_text("3\n")
    os.rename(parent / "compressed", parent / "archived")
    assert settings(parent / "archived")["limit"] == 3
    assert settings(parent / "archived")["query"] == "archived"
    assert not (parent / "compressed").exists()


def test_mv_elsewhere_or_onto_a_query_is_refused_and_changes_nothing(mounted: Mount) -> None:
    a, b = mounted.path(OLD), mounted.path("compress data with gzip")
    a.mkdir()
    b.mkdir()
    (a / ".meta" / "limit").write_text("7\n")
    for target, code in ((b / OLD, errno.EPERM),  # into another query: EPERM, not EXDEV
                         (b, errno.ENOTEMPTY),  # onto a query: it holds its own settings
                         (mounted.path("ontology", COMPRESSION, OLD), errno.EPERM)):
        with pytest.raises(OSError) as refused:
            os.rename(a, target)
        assert refused.value.errno == code, target
    done = sh(f'mv "{OLD}" "compress data with gzip/"', mounted.mountpoint)
    assert done.returncode != 0 and "Operation not permitted" in done.stderr, done
    with pytest.raises(OSError) as invalid:
        os.rename(a, mounted.path("gzip@1.5"))  # a name mkdir refuses too
    assert invalid.value.errno == errno.EPERM
    assert sorted(os.listdir(mounted.mountpoint)) == sorted(
        ["ontology", OLD, "compress data with gzip"])
    assert settings(a)["limit"] == 7 and OLD not in os.listdir(b)


def test_mv_onto_a_reserved_or_invalid_name_says_so_in_mv_s_words(mounted: Mount) -> None:
    """What `mv` prints is what usage.md says: onto the tree's own directory (`ontology`
    in the root, `documents` or `ingest` in an ontology, `.meta` in a query) *File
    exists*, as mkdir says (it was ENOTEMPTY); a name mkdir refuses (`.hidden`, `x@1.5`,
    `documents` in the root) *Operation not permitted* (an invalid one was EINVAL, which
    mv prints as "cannot move ... to a subdirectory of itself")."""
    query = mounted.path(OLD)
    query.mkdir()
    (query / "read").mkdir()
    scoped = mounted.path("ontology", COMPRESSION, "gzip files")
    scoped.mkdir()
    for where, name, says in (("", "ontology", "File exists"),
                              ("", "documents", "Operation not permitted"),
                              (f"ontology/{COMPRESSION}/", "ingest", "File exists"),
                              (f"ontology/{COMPRESSION}/", "documents", "File exists"),
                              (f"{OLD}/", ".meta", "File exists"),
                              ("", ".hidden", "Operation not permitted"),
                              ("", "x@1.5", "Operation not permitted"),
                              (f"{OLD}/", "y@2", "Operation not permitted")):
        source = f"{where}read" if where == f"{OLD}/" else (
            f"{where}gzip files" if where.startswith("ontology") else OLD)
        done = sh(f'mv -T "{source}" "{where}{name}"', mounted.mountpoint)
        assert done.returncode != 0, (source, name)
        assert says in done.stderr and "subdirectory of itself" not in done.stderr, \
            (source, name, done.stderr)
    assert sorted(os.listdir(mounted.mountpoint)) == ["ontology", OLD]
    assert "read" in os.listdir(query) and scoped.is_dir()


# -- touch ---------------------------------------------------------------------------------

def test_touch_on_a_directory_or_a_control_file_says_it_is_not_permitted(
        mounted: Mount) -> None:
    query = mounted.path(OLD)
    query.mkdir()
    for path in (query, query / ".meta", mounted.mountpoint / "ontology",
                 query / ".meta" / "threshold"):
        before = path.stat().st_mtime_ns
        done = sh(f"touch {str(path)!r}", mounted.mountpoint)
        assert done.returncode != 0 and "setting times" in done.stderr, (path, done)
        assert "Operation not permitted" in done.stderr, (path, done)
        with pytest.raises(PermissionError) as refused:
            os.utime(path, (1_000_000_000, 1_000_000_000))
        assert refused.value.errno == errno.EPERM, path
        assert path.stat().st_mtime_ns == before, path
    assert (query / ".meta" / "threshold").read_text().splitlines()[-1] == "inherit"
    scratch = query / ".meta" / "threshold.swp"  # a file of the user's: its times kept
    scratch.write_text("0.5\n")
    os.utime(scratch, (1_000_000_000, 1_000_000_000))
    assert scratch.stat().st_mtime == 1_000_000_000


# -- a refused replacement leaves nothing behind -------------------------------------------

@pytest.mark.parametrize(("target", "content", "code"),
                         [("threshold", "banana\n", errno.EINVAL),
                          ("status", "0.5\n", errno.EPERM)])
def test_a_refused_os_replace_onto_a_control_leaves_no_scratch_file(
        mounted: Mount, target: str, content: str, code: int) -> None:
    meta = mounted.path(OLD, ".meta")
    meta.parent.mkdir()
    before = (meta / target).read_text()
    scratch = meta / f".{target}.x8Kq2"
    scratch.write_text(content)
    with pytest.raises(OSError) as refused:
        os.replace(scratch, meta / target)
    assert refused.value.errno == code
    assert scratch.name not in os.listdir(meta)
    assert not scratch.exists()
    if target == "threshold":
        assert (meta / target).read_text() == before


# -- ls -U ---------------------------------------------------------------------------------

def test_ls_u_lists_the_results_best_first_before_nested_queries_links_and_meta(
        mounted: Mount) -> None:
    query = mounted.path("compress data with gzip")
    query.mkdir()
    (query / "levels").mkdir()
    os.symlink(f"../ontology/{COMPRESSION}", query / "compression")
    done = sh("ls -U", query)
    assert done.returncode == 0
    names = done.stdout.splitlines()
    ranked = [n for n in names if n.endswith(".concept.md")]
    assert ranked and names[:len(ranked)] == ranked, names
    assert names[len(ranked):] == ["levels", "compression"], names
    assert sh("ls -AU", query).stdout.splitlines()[-1] == ".meta"
    scores = [float(os.getxattr(query / n, "user.kg.score")) for n in ranked]
    assert scores == sorted(scores, reverse=True)
