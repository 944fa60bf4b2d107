"""The quantised scan returns exactly the rows an exact float32 scan returns, at the
threshold boundary too, for rows of any norm, after appends and deletes."""

from __future__ import annotations

import numpy as np
import pytest

from kg_fuse.server.scan import QuantisedScan, exact_scores


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
