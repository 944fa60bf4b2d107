#!/usr/bin/env python3
"""Index build cost: the texts a build embeds now vs one vector per concept (the old
build), measured in the same run on the same concepts of a built store.

    .venv/bin/python scripts/bench_build.py STORE.sqlite3 [--sample N]

Prints wall and CPU seconds of embedding each variant's texts, and their ratios to the
one-vector reference. The store is only read.
"""

from __future__ import annotations

import argparse
import random
import resource
import time
from pathlib import Path

from kg_fuse.server.corpus import embedding_text
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge import indexing
from kg_fuse.server.search.views import VIEWS, embedded_views
from kg_fuse.server.storage.store import Store


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(embedder: Embedder, texts: list[str]) -> tuple[float, float]:
    texts = sorted(texts, key=len)  # as the build does
    wall0, cpu0 = time.perf_counter(), cpu()
    embedder.encode(texts)
    return time.perf_counter() - wall0, cpu() - cpu0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--sample", type=int, default=1000, help="concepts (0: all)")
    args = ap.parse_args()
    store = Store(args.store)
    concepts = indexing._concept_texts(
        store, store.query("SELECT * FROM concepts ORDER BY id"))
    rows = {r["id"]: (r["label"], r["description"] or "")
            for r in store.query("SELECT id, label, description FROM concepts")}
    if args.sample:
        concepts = random.Random(7).sample(concepts, min(args.sample, len(concepts)))
    variants = {
        "one vector per concept (old build)": [embedding_text(*rows[c.id]) for c in concepts],
        f"weighted views {'+'.join(embedded_views())} (this build)":
            [c.views[v] for c in concepts for v in embedded_views() if v in c.views],
        "all views (every view embedded)":
            [c.views[v] for c in concepts for v in VIEWS if v in c.views],
    }
    embedder = Embedder()
    embedder.load()
    embedder.encode(["warm up"])
    results = {name: [] for name in variants}
    for _ in range(2):  # interleaved, so load on a shared machine hits both alike
        for name, texts in variants.items():
            results[name].append(timed(embedder, texts))
    ref_wall = min(w for w, _ in results[next(iter(variants))])
    ref_cpu = min(c for _, c in results[next(iter(variants))])
    print(f"{len(concepts)} concepts")
    print(f"{'variant':<48} {'texts':>6} {'wall s':>7} {'cpu s':>7} {'wall x':>7} {'cpu x':>6}")
    for name, texts in variants.items():
        wall = min(w for w, _ in results[name])
        cpu_s = min(c for _, c in results[name])
        print(f"{name:<48} {len(texts):>6} {wall:>7.1f} {cpu_s:>7.1f} "
              f"{wall / ref_wall:>7.2f} {cpu_s / ref_cpu:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
