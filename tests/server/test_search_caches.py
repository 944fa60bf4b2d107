"""The search path's shortcuts give the answers of the long way: ranking only the top
``k`` (ties still by id), keyword rows prepared once, caches that empty themselves when
the content they were filled from changes."""

from __future__ import annotations

import numpy as np
import pytest

from kg_fuse.server.search.generations import GenerationCache
from kg_fuse.server.search.index import ConceptIndex


def random_index(seed: int, n: int = 400) -> ConceptIndex:
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((n, 16)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[50:60] = rows[7]  # exact ties: ranked by id
    ids = [f"c{rng.integers(10**6):07d}-{i}" for i in range(n)]
    members = {cid: frozenset({"even" if i % 2 == 0 else "odd"}) for i, cid in enumerate(ids)}
    return ConceptIndex.build(dict(zip(ids, rows, strict=True)), members)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_top_k_is_the_prefix_of_the_full_ranking(seed: int) -> None:
    index = random_index(seed)
    rng = np.random.default_rng(seed + 10)
    query = index.matrix[7] + rng.standard_normal(16).astype(np.float32) * 0.3
    keyword = {cid: float(v) for cid, v in zip(index.ids[::9], rng.uniform(0, 1, 45),
                                               strict=False)}
    keyword["not-in-the-index"] = 1.0
    for threshold in (0.0, 0.2, 0.5):
        for ontology in (None, "even"):
            full = index.search(query, threshold, ontology=ontology, keyword=keyword)
            assert full == sorted(full, key=lambda hit: (-hit[1], hit[0]))
            for k in (1, 5, 12, 50, 1000):
                assert index.search(query, threshold, ontology=ontology, top_k=k,
                                    keyword=keyword) == full[:k]
                prepared = index.keyword_rows(keyword)
                assert index.search(query, threshold, ontology=ontology, top_k=k,
                                    keyword=prepared) == full[:k]


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_top_k_is_the_prefix_with_familiarity_and_clipped_scores(seed: int) -> None:
    """The same with the familiarity factors (keyword rows' own, ``rest`` for the others)
    and a long query vector, so that many scores clip to 1 and tie (ranked by id)."""
    index = random_index(seed)
    rng = np.random.default_rng(seed + 20)
    query = (index.matrix[7] + rng.standard_normal(16).astype(np.float32) * 0.3) * 3
    keyword = {cid: float(v) for cid, v in zip(index.ids[::9], rng.uniform(0, 1, 45),
                                               strict=False)}
    factors = {cid: float(f) for cid, f in zip(index.ids[::18], rng.uniform(0.2, 1, 23),
                                               strict=False)}
    # the best rows by vector score, with keyword scores but made unfamiliar: they fall
    # behind rows without keywords, which the ranking still has to find
    best = np.argsort(-(index.matrix @ query))[:30:2]
    keyword.update({index.ids[r]: 0.01 for r in best})
    factors.update({index.ids[r]: 0.1 for r in best})
    clipped = 0
    for rest in (1.0, 0.5, 0.25):
        prepared = index.keyword_rows(keyword, factors, rest)
        for threshold in (0.0, 1e-6, 0.3, 0.9):
            for ontology in (None, "odd"):
                full = index.search(query, threshold, ontology=ontology, keyword=prepared)
                clipped = max(clipped, sum(score == 1.0 for _, score in full))
                for k in (1, 5, 12, 50, 1000):
                    assert index.search(query, threshold, ontology=ontology, top_k=k,
                                        keyword=prepared) == full[:k]
    assert clipped > 12  # ties at 1 across the cut


def test_a_new_generation_empties_the_cache() -> None:
    cache: GenerationCache[str, int] = GenerationCache(8)
    first, second = object(), object()
    cache.put((first, 3), "q", 1)
    assert cache.get((first, 3), "q") == 1
    assert cache.get_many((first, 3), ["q", "r"]) == {"q": 1}
    assert cache.get((first, 4), "q") is None  # the epoch moved
    cache.put((first, 4), "q", 2)
    assert cache.get((second, 4), "q") is None  # another index, though equal in value
    assert len(cache) == 0


def test_the_cache_is_bounded() -> None:
    cache: GenerationCache[int, int] = GenerationCache(4)
    cache.put_many((1,), {i: i for i in range(10)})
    assert len(cache) == 4
    assert cache.get_many((1,), list(range(10))) == {6: 6, 7: 7, 8: 8, 9: 9}
