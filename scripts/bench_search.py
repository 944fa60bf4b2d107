#!/usr/bin/env python3
"""Search latency of the server's search (what POST /query/search runs: embedding,
keywords, scan, near-miss hint) on a built store, against references in the same run.

    .venv/bin/python scripts/bench_search.py STORE.sqlite3 [--rounds 5]

Variants, interleaved query by query so a shared machine's load hits all alike:

- ``vector only``: the search before hybrid retrieval (no keyword scores, no reading
  of the query's words, no familiarity factor): the reference;
- ``hybrid, no term cache``: keyword lookups in SQLite on every query;
- ``hybrid (this build)``: as the server runs now (the query's words read through word
  forms and WordNet, keywords, familiarity), for a query text it has not seen;
- ``hybrid, query seen before``: the same with the server's per-query cache warm.

Except in the last variant, the per-query cache (vector with its embedding, keyword rows)
is emptied before every search, so each search pays for its embedding as a new query does.

Queries are the shipped eval sets' (relevant and gibberish); the threshold is the
store's default. Prints p50 and p90 per variant and the ratio to the reference. The
store is opened read-only in spirit: nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from kg_fuse.eval import sets
from kg_fuse.server.embedding.embedder import Embedder
from kg_fuse.server.knowledge.graph import KnowledgeGraph
from kg_fuse.server.search import keywords
from kg_fuse.server.search.generations import GenerationCache
from kg_fuse.server.search.understand import QueryReading
from kg_fuse.server.storage.store import Store


class Forgetful(dict):
    def __setitem__(self, key: object, value: object) -> None:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threshold", type=float, help="default: the store's default")
    args = ap.parse_args()
    graph = KnowledgeGraph(Store(args.store), Embedder())
    graph.embedder.load()
    graph.reload_index()
    threshold = args.threshold or graph.default_threshold()
    queries = []
    for name in ("stdlib", "heldout"):
        qset = sets.load(name)
        queries += [q.text for q in qset.relevant] + qset.gibberish
    queries = list(dict.fromkeys(queries))
    searcher = graph.searcher
    hybrid_keywords, hybrid_read = searcher.keyword_scores, searcher.read

    def uncached(reading: QueryReading, index: object) -> keywords.KeywordMatch:
        cache = keywords.TermCache()
        cache.counts, cache.rows = Forgetful(), Forgetful()
        return keywords.keyword_scores(graph.store, reading, len(graph.index), cache=cache)

    def unread(query: str) -> QueryReading:  # no reading: the query embedded as typed
        return QueryReading((), judged=False)

    def no_keywords(reading: QueryReading, index: object) -> keywords.KeywordMatch:
        return keywords.KeywordMatch({}, {})

    variants = {  # name: (keyword scores, query reading, keep the per-query cache)
        "vector only (before hybrid)": (no_keywords, unread, False),
        "hybrid, no term cache": (uncached, hybrid_read, False),
        "hybrid (this build)": (hybrid_keywords, hybrid_read, False),
        "hybrid, query seen before": (hybrid_keywords, hybrid_read, True),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    graph.embedder.encode(queries[:8])  # warm up
    for _ in range(args.rounds):
        for q in queries:  # variants interleaved query by query: load hits all alike
            for name, (kw, read, keep) in variants.items():
                searcher.keyword_scores, searcher.read = kw, read  # type: ignore[method-assign]
                if not keep:
                    searcher._prepared = GenerationCache(1)  # a query the server has not seen
                t0 = time.perf_counter()
                graph.searcher.search(q, threshold, 50, 0, None)
                times[name].append(time.perf_counter() - t0)
    ref = statistics.median(times["vector only (before hybrid)"])
    print(f"{len(graph.index)} concepts, {len(queries)} queries x {args.rounds} rounds, "
          f"threshold {threshold:.2f}")
    print(f"{'variant':<30} {'p50 ms':>7} {'p90 ms':>7} {'p50 x':>6}")
    for name, values in times.items():
        values.sort()
        p50, p90 = statistics.median(values), values[int(0.9 * (len(values) - 1))]
        print(f"{name:<30} {p50 * 1e3:>7.2f} {p90 * 1e3:>7.2f} {p50 / ref:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
