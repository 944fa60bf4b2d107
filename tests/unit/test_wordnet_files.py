"""WordNet's sorted index files, looked up through their sparse index: every key finds the
line a plain scan of the file finds, and a lookup reads the file once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kg_fuse.server.search.lexicon import _SortedLines

HEADER = ["  1 This software and database is being provided to you, the LICENSEE,",
          "  2 by Princeton University under the following license.  By obtaining"]
ENTRIES = ["a n 1 0 1 0 02233", "aa n 1 0 1 0 01001", "aardvark n 1 1 @ 1 0 02346",
           "dog n 7 4 @ ~ + 7 1 02086723 10133978", "dog_days n 1 1 @ 1 0 15213774",
           "dogbane n 1 2 @ #m 1 0 12767123", "dogs",  # a key alone, no other field
           "lonely a 3 2 & + 3 1 01314",
           "long " + "x " * 120 + "end",  # longer than any block below
           "zebra n 1 3 @ ~ #m 1 0 02391049",
           "zymurgy n 1 2 @ ;c 1 0 06093244"]


def plain_scan(path: Path, key: str) -> bytes | None:
    """The first line whose first field is ``key``, read line by line from the start."""
    for line in path.read_bytes().split(b"\n"):
        if line.split(b" ", 1)[0] == key.encode():
            return line
    return None


PRESENT = [line.split(" ", 1)[0] for line in ENTRIES]
#: before the first key, between keys (prefixes of them, longer words), after the last
ABSENT = ["0", "A", "a_", "ab", "aardvarks", "do", "dog_", "dogb", "doga", "dogsx", "lon",
          "longer", "lonelyx", "m", "zebr", "zebras", "zz", "~"]
#: never a line's first field: no lookup at all
REFUSED = ["", "  1", "dog days", "dog\n", "\u00e9t\u00e9"]


@pytest.mark.parametrize("block", [16, 64, 4096])
@pytest.mark.parametrize("ending", ["\n", ""], ids=["newline-at-end", "no-newline-at-end"])
def test_every_key_finds_the_line_a_plain_scan_finds(tmp_path: Path, block: int,
                                                     ending: str) -> None:
    path = tmp_path / "index.noun"
    path.write_text("\n".join(HEADER + ENTRIES) + ending, encoding="ascii")
    lines = _SortedLines(path)
    lines.BLOCK = block
    for key in PRESENT + ABSENT:
        assert lines.find(key) == plain_scan(path, key), key
    assert all(lines.find(key) is None for key in REFUSED)
    assert [lines.find(key) is not None for key in PRESENT] == [True] * len(PRESENT)
    keys, starts = lines.sparse_index()
    assert starts[0] == 0 and keys == sorted(keys)


def test_a_lookup_reads_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    """Each lookup is one read of one block, not a binary search of reads in Python."""
    path = tmp_path / "index.noun"
    extra = [f"zz{i:04d} n 1 0 0 1 0 {i:08d}" for i in range(3000)]
    path.write_text("\n".join(HEADER + ENTRIES + extra) + "\n", encoding="ascii")
    lines = _SortedLines(path)
    assert lines.find("dog") is not None  # the first lookup reads the sparse index
    reads = []
    real_pread = os.pread

    def counted(fd: int, size: int, offset: int) -> bytes:
        reads.append(offset)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(os, "pread", counted)
    for key in ("a", "dogbane", "zebra", "zz0250", "zz2999", "zz3000", "kangaroo"):
        reads.clear()
        found = lines.find(key)
        assert found == plain_scan(path, key) and len(reads) == 1, (key, reads)
