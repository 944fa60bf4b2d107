#!/usr/bin/env python3
"""Two FUSE clients of the same platform side by side, as a user meets them: kg-fuse and
the platform's own client (kg-fuse 0.14.0), each mounted already.

    .venv/bin/python scripts/compare_mounts.py --ontology NAME \\
        --truth MOUNT_A/ontology/NAME/documents MOUNT_A MOUNT_B QUERY...

For each mount and each query (made with ``mkdir``, at the server default):

- ``files``: what ``ls QUERY`` lists, and ``ls ontology/NAME/QUERY`` (scoped) where the
  client has ontology directories of queries;
- ``first ls``: the time of the first ``ls`` of the query (ms);
- ``evidence right``: of the evidence lines of the listed files that name a document of
  the ontology, how many name the one whose text holds the quote (``--truth`` is a folder
  holding the ontology's documents, as the platform stores them).

Also each mount's count of the ontology's documents. Queries are removed afterwards.
Only paths are touched: any two mounts of the same server can be compared.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import time
from pathlib import Path

# kg-fuse: "> quote" lines, then "> — FILE, section N, paragraph M (ONTOLOGY)"
OURS = re.compile(r"((?:^> (?!— ).*\n)+)^> — ([^,\n]+?)(?:, [^\n]*)? \(", re.M)
# 0.14.0: "### Instance N from FILE (para P)" then "> quote..."
THEIRS = re.compile(r"^### Instance \d+ from (.+?) \(para \d+\)\n\n> (.*)", re.M)


def evidence(text: str) -> list[tuple[str, str]]:
    """(file named, the quote's first words) for every evidence line of a result."""
    found = [(name.strip(), quote.split("\n")[0].lstrip("> #").strip())
             for quote, name in OURS.findall(text)]
    found += [(name.strip(), quote.lstrip("# ").strip()) for name, quote in THEIRS.findall(text)]
    return found


def results(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.endswith(".concept.md")]


def measure(mount: Path, text: str, ontology: str, truth: dict[str, str]
            ) -> dict[str, object]:
    query = mount / text
    query.mkdir()
    started = time.perf_counter()
    listed = results(query)
    first_ls = (time.perf_counter() - started) * 1000
    scoped_dir = mount / "ontology" / ontology / text
    scoped: int | str = "-"
    try:
        scoped_dir.mkdir()
        scoped = len(results(scoped_dir))
    except OSError:
        pass  # no query directories inside an ontology
    right = named = 0
    for path in listed:
        for name, quote in evidence(path.read_text(errors="replace")):
            if name in truth and quote:
                named += 1
                right += quote[:40] in truth[name]
    for folder in (scoped_dir, query):
        shutil.rmtree(folder, ignore_errors=True)
    return {"files": len(listed), "scoped": scoped, "first_ls": first_ls,
            "evidence": f"{right}/{named}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ontology", required=True)
    parser.add_argument("--truth", type=Path, required=True)
    parser.add_argument("mounts", type=Path, nargs=2)
    parser.add_argument("queries", nargs="+")
    args = parser.parse_args()
    truth = {p.name: p.read_text(errors="replace") for p in args.truth.iterdir()
             if p.is_file() and not p.name.startswith(".")}
    for mount in args.mounts:
        docs = mount / "ontology" / args.ontology / "documents"
        count = len([n for n in os.listdir(docs) if not n.startswith(".")]) \
            if docs.is_dir() else "missing"
        print(f"{mount}: {count} documents of {args.ontology!r}")
    print(f"{'query':<28} " + " | ".join(f"{'files':>5} {'scoped':>6} {'first ls':>8} "
                                         f"{'evidence':>8}" for _ in args.mounts))
    for text in args.queries:
        row = [measure(mount, text, args.ontology, truth) for mount in args.mounts]
        print(f"{text:<28} " + " | ".join(
            f"{r['files']:>5} {r['scoped']!s:>6} {r['first_ls']:>6.0f}ms {r['evidence']:>8}"
            for r in row))


if __name__ == "__main__":
    main()
