"""The quantised scan returns exactly the rows an exact float32 scan returns, at the
threshold boundary too, for rows of any norm, after appends and deletes."""

from __future__ import annotations

from unittest import mock

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kg_fuse.server.search import scan as scan_module
from kg_fuse.server.search.scan import QuantisedScan, exact_scores


def exact(matrix: np.ndarray, query: np.ndarray, threshold: float,
          rows: np.ndarray | None = None) -> set[int]:
    scores = exact_scores(matrix, query)
    keep = np.nonzero(scores >= threshold)[0]
    if rows is not None:
        keep = np.intersect1d(keep, rows)
    return set(keep.tolist())


def vectors(rng: np.random.Generator, n: int, dims: int = 384, unit: bool = True
            ) -> np.ndarray:
    matrix = rng.standard_normal((n, dims), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    if not unit:  # fused multi-view rows: any norm, some peaky
        matrix *= rng.uniform(0.2, 2.0, size=(n, 1)).astype(np.float32)
        matrix[::7, 3] *= 25
    return matrix


def near(rng: np.random.Generator, row: np.ndarray, noise: float) -> np.ndarray:
    query = row / np.linalg.norm(row) + rng.standard_normal(len(row)).astype(np.float32) * noise
    return (query / np.linalg.norm(query)).astype(np.float32)


@pytest.mark.parametrize("unit", [True, False])
def test_boundary_thresholds_give_exactly_the_exact_rows(unit: bool) -> None:
    rng = np.random.default_rng(1 + unit)
    matrix = vectors(rng, 20_000, unit=unit)
    scan = QuantisedScan(matrix)
    for trial in range(20):
        query = near(rng, matrix[trial * 31], noise=0.05 * (trial % 4))
        scores = np.sort(exact_scores(matrix, query))[::-1]
        for k in (1, 10, 50, 500):
            threshold = float(scores[k - 1])  # the k-th score itself: a boundary row
            positions, got_scores = scan.above(query, threshold)
            assert set(positions.tolist()) == exact(matrix, query, threshold)
            assert np.all(got_scores >= threshold)


def test_without_numkong_numpy_gives_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module, "numkong", None)
    rng = np.random.default_rng(5)
    matrix = vectors(rng, 3_000, unit=False)
    scan = QuantisedScan(matrix)
    query = near(rng, matrix[11], 0.05)
    threshold = float(np.sort(exact_scores(matrix, query))[-30])
    assert set(scan.above(query, threshold)[0].tolist()) == exact(matrix, query, threshold)


def test_appends_deletes_and_row_subsets() -> None:
    rng = np.random.default_rng(3)
    matrix = vectors(rng, 5_000)
    scan = QuantisedScan(matrix)
    extra = vectors(rng, 1_000, unit=False)
    scan.append(extra)
    matrix = np.concatenate([matrix, extra])
    gone = rng.choice(len(matrix), 700, replace=False)
    scan.delete(gone)
    matrix = np.delete(matrix, gone, axis=0)
    assert len(scan) == len(matrix)
    subset = np.sort(rng.choice(len(matrix), 2_000, replace=False))
    for trial in range(10):
        query = near(rng, matrix[trial * 101], 0.1)
        scores = exact_scores(matrix, query)
        threshold = float(np.sort(scores)[-20])
        assert set(scan.above(query, threshold)[0].tolist()) == exact(matrix, query, threshold)
        sub_threshold = float(np.sort(scores[subset])[-5])
        got = scan.above(query, sub_threshold, rows=subset)[0]
        assert set(got.tolist()) == exact(matrix, query, sub_threshold, subset)


def test_empty_and_tiny() -> None:
    scan = QuantisedScan(np.zeros((0, 8), np.float32))
    assert scan.above(np.ones(8, np.float32), 0.0)[0].size == 0
    scan.append(np.eye(8, dtype=np.float32))
    positions, scores = scan.above(np.eye(8, dtype=np.float32)[2], 0.5)
    assert positions.tolist() == [2] and scores.tolist() == [1.0]


def test_wide_rows_use_exact_float64_sums() -> None:
    """Past 1,040 dimensions an int8 dot product no longer fits float32 exactly."""
    rng = np.random.default_rng(4)
    matrix = vectors(rng, 300, dims=1_100, unit=False)
    scan = QuantisedScan(matrix)
    query = near(rng, matrix[5], 0.02)
    threshold = float(np.sort(exact_scores(matrix, query))[-3])
    assert set(scan.above(query, threshold)[0].tolist()) == exact(matrix, query, threshold)


finite = st.floats(-1.0, 1.0, width=32, allow_subnormal=False)


@st.composite
def boundary_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Rows crowded at one score (a base row plus tiny or one-coordinate changes), with
    any norms and peaks, a query, a threshold at or one float next to a row's score."""
    dims = draw(st.integers(2, 48))
    n = draw(st.integers(1, 60))
    base = draw(hnp.arrays(np.float32, dims, elements=finite))
    nudges = draw(hnp.arrays(np.float32, (n, dims), elements=st.floats(
        -2**-10, 2**-10, width=32, allow_subnormal=False)))
    sparse = draw(hnp.arrays(np.bool_, (n, dims)))
    norms = draw(hnp.arrays(np.float32, (n, 1), elements=st.sampled_from(
        [1.0, 1e-3, 0.5, 3.0, 40.0, 1e3])))
    rows = (base + np.where(sparse, nudges, 0)) * norms
    rows[draw(st.integers(0, n - 1))] = 0  # an all-zero row
    peak = draw(st.integers(0, dims - 1))
    rows[::3, peak] *= draw(st.sampled_from([1.0, 50.0, -300.0]))  # peaky rows
    query = draw(hnp.arrays(np.float32, dims, elements=finite))
    if draw(st.booleans()):
        query = (base + draw(hnp.arrays(np.float32, dims, elements=st.floats(
            -2**-7, 2**-7, width=32)))).astype(np.float32)
    scores = exact_scores(rows, query)
    threshold = float(scores[draw(st.integers(0, n - 1))])
    threshold = float(np.nextafter(threshold, draw(st.sampled_from([-np.inf, np.inf]))) if
                      draw(st.booleans()) else threshold)
    return rows.astype(np.float32), query, threshold, draw(st.sampled_from([2, 7, 4096]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(boundary_cases(), st.data())
def test_no_row_at_or_above_the_threshold_is_ever_lost(case, data) -> None:
    rows, query, threshold, block = case
    with mock.patch.object(scan_module, "BLOCK_ROWS", block):  # many blocks, both threads
        scan = QuantisedScan(rows)
        positions, scores = scan.above(query, threshold)
        assert set(positions.tolist()) == exact(rows, query, threshold)
        assert np.array_equal(scores, exact_scores(rows[positions], query))
        subset = np.flatnonzero(data.draw(hnp.arrays(np.bool_, len(rows))))
        got = scan.above(query, threshold, rows=subset)[0]
        assert set(got.tolist()) == exact(rows, query, threshold, subset)


def needed(rows: np.ndarray, query: np.ndarray, threshold: float, count: int,
           ceiling: float) -> set[int]:
    """The rows a search ranking the best ``count`` needs: at or above the threshold,
    and at least the ``count``-th best score (ties included) or the ceiling."""
    scores = exact_scores(rows, query)
    above = np.sort(scores[scores >= threshold])[::-1]
    best = above[count - 1] if len(above) >= count else -np.inf
    return set(np.flatnonzero((scores >= threshold) & (scores >= min(best, ceiling))).tolist())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(boundary_cases(), st.integers(1, 12), st.sampled_from([np.inf, 0.0, 0.3, 1.0]))
def test_the_best_rows_are_never_lost(case, count: int, ceiling: float) -> None:
    rows, query, threshold, block = case
    with mock.patch.object(scan_module, "BLOCK_ROWS", block):
        scan = QuantisedScan(rows)
        positions, scores = scan.above(query, threshold, top=(count, ceiling))
        got = set(positions.tolist())
        assert needed(rows, query, threshold, count, ceiling) <= got
        assert got <= exact(rows, query, threshold)
        assert np.array_equal(scores, exact_scores(rows[positions], query))


def test_ranking_the_best_few_rescores_a_few() -> None:
    """A search for the best 10 at a threshold most rows pass (the closest concepts of
    a short page) rescores a few dozen rows, not the thousands above the threshold."""
    rng = np.random.default_rng(6)
    matrix = vectors(rng, 20_000)
    scan = QuantisedScan(matrix)
    query = near(rng, matrix[17], 0.1)
    assert len(exact(matrix, query, 1e-6)) > 5_000
    positions, _ = scan.above(query, 1e-6, top=(10, np.inf))
    assert needed(matrix, query, 1e-6, 10, np.inf) <= set(positions.tolist())
    assert len(positions) < 200


def test_a_zero_query_scores_nothing_above_zero() -> None:
    matrix = vectors(np.random.default_rng(7), 1_000)
    scan = QuantisedScan(matrix)
    assert scan.above(np.zeros(384, np.float32), 1e-6)[0].size == 0
    assert len(scan.above(np.zeros(384, np.float32), 0.0)[0]) == 1_000
