"""Exact threshold search at scale: an int8 scan finds candidates, float64 decides.

A search keeps the rows whose score ``row . query`` is at least a threshold. Reading the
float32 matrix is the cost (1.5 KiB a row at 384 dimensions), so the scan reads an int8
copy instead (a quarter of the bytes; numkong's SIMD kernels give the exact integer dot
products, VNNI where the CPU has it) and rescores only the candidates. No true result is
lost, because the int8 estimate's error is bounded per row:

    row   = s_r * c_r + e_r      (c_r int8, s_r its scale, e_r the rounding error)
    query = s_q * c_q + f        (the query is quantised the same way)
    row . query = s_r s_q (c_r . c_q) + s_r (c_r . f) + e_r . query
    |error| <= s_r |c_r| |f| + |e_r| |query|          (Cauchy-Schwarz)

so every row whose estimate plus its bound (plus a margin for float32 rounding of the
estimate, relative to its size) reaches the threshold is a candidate, and the rescoring
keeps exactly those whose score (the float64 product of the float32 row and query, so no
BLAS rounding decides a tie at the boundary) reaches it. Rows may have any norm (fused
multi-view vectors); the query too. The scan runs in blocks that stay in cache, filtered
first against the largest bound of any row (one multiply and compare per row), then
against each survivor's own bound; two threads share a large scan (the kernels release
the GIL).

Memory: one int8 byte per dimension plus 12 bytes per row (scale, two bound terms):
396 bytes a row at 384 dimensions, 38 MiB for 100k rows and 378 MiB for 1M, beside the
float32 matrix (1,536 bytes a row: 147 MiB / 1.43 GiB) that the rescoring reads only at
the candidates' rows. A query allocates one block of float32 products per thread.

Updates are cheap: ``append`` quantises only the new rows, ``delete`` drops rows.
"""

from __future__ import annotations

import concurrent.futures
import logging

import numpy as np

from kg_fuse.exits import install_hint

log = logging.getLogger(__name__)

try:  # in the server extra; a venv set up before it was added still answers (slowly)
    import numkong
except ImportError:  # pragma: no cover - exercised by the tests with numkong hidden
    numkong = None
    log.warning("numkong is not installed: the search scan uses numpy (slow); %s",
                install_hint("server"))

BLOCK_ROWS = 32_768  # 12 MiB of codes, 128 KiB of products: filtered while in cache
_MARGIN = 1e-5  # float32 rounding of the estimate and its bound, relative to their size
_GAP = 1e-9  # how far below the best a row left out by ``top`` scores, at least
_POOL = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="scan")


def _quantise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """int8 codes, scales, and the two per-row bound terms (|c_r| s_r, |e_r|)."""
    rows = np.asarray(rows, dtype=np.float32)
    parts = [_quantise_block(rows[start:start + BLOCK_ROWS])
             for start in range(0, len(rows), BLOCK_ROWS)]
    if not parts:
        return (np.zeros(rows.shape, np.int8), *(np.zeros(0, np.float32),) * 3)
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def _quantise_block(rows: np.ndarray) -> tuple[np.ndarray, ...]:
    peak = np.abs(rows).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(rows / scales[:, None]), -127, 127).astype(np.int8)
    decoded = codes.astype(np.float32) * scales[:, None]
    code_norm = np.linalg.norm(decoded, axis=1)
    residual = np.linalg.norm(rows - decoded, axis=1)
    # rounded up past float32's rounding of the products, differences and sums (each
    # well under 1e-6 relative), so neither term understates its exact value
    up = np.float32(1 + 1e-5)
    return codes, scales, code_norm * up, residual * up + code_norm * np.float32(1e-6)


def exact_scores(rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The reference score of each row: float64 sums of the (exact) products of float32
    components, in one fixed order per row, so a row scores the same whether it is
    scored alone or in a full scan (BLAS kernels round differently by block)."""
    return np.einsum("ij,j->i", rows.astype(np.float64), query.astype(np.float64))


class QuantisedScan:
    """The int8 side of a float32 matrix; ``above`` gives exact threshold results."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self._codes, self._scales, self._code_norm, self._residual = _quantise(self.matrix)

    def __len__(self) -> int:
        return len(self.matrix)

    @property
    def nbytes(self) -> int:
        """Memory beyond the float32 matrix."""
        return (self._codes.nbytes + self._scales.nbytes + self._code_norm.nbytes
                + self._residual.nbytes)

    def append(self, rows: np.ndarray) -> None:
        """Add rows at the end (quantising only them)."""
        rows = np.asarray(rows, dtype=np.float32)
        if not len(self.matrix):  # an empty index takes its width (the model's) from them
            self.matrix = np.zeros((0, rows.shape[-1]), np.float32)
            self._codes = np.zeros((0, rows.shape[-1]), np.int8)
        rows = rows.reshape(-1, self.matrix.shape[1])
        codes, scales, code_norm, residual = _quantise(rows)
        self.matrix = np.concatenate([self.matrix, rows])
        self._codes = np.concatenate([self._codes, codes])
        self._scales = np.concatenate([self._scales, scales])
        self._code_norm = np.concatenate([self._code_norm, code_norm])
        self._residual = np.concatenate([self._residual, residual])

    def delete(self, positions: np.ndarray | list[int]) -> None:
        """Drop rows by position; later rows move up (as with ``np.delete``)."""
        self.matrix = np.delete(self.matrix, positions, axis=0)
        self._codes = np.delete(self._codes, positions, axis=0)
        self._scales = np.delete(self._scales, positions)
        self._code_norm = np.delete(self._code_norm, positions)
        self._residual = np.delete(self._residual, positions)

    def above(self, query: np.ndarray, threshold: float, rows: np.ndarray | None = None,
              top: tuple[int, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Positions (into the matrix) and exact scores (float64 products of the float32
        rows) of the rows scoring at least ``threshold``, in position order; ``rows``
        restricts the scan to a subset.

        ``top = (count, ceiling)`` asks only for the best: rows scoring below both the
        ``count``-th best score and ``ceiling`` may be left out (their bounds prove it
        without rescoring them). A search at a low threshold that ranks a few (the
        closest concepts) then rescores a few dozen rows, not thousands.
        """
        if len(self.matrix) == 0 or (rows is not None and len(rows) == 0):
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        query = np.asarray(query, dtype=np.float32)
        if threshold > 0 and not query.any():  # every score is 0 (a query of noise)
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        candidates = _Candidates(query, threshold)
        if rows is None:
            found = candidates.scan(self._codes, self._scales, self._code_norm,
                                    self._residual, top)
            positions = found
        else:
            rows = np.asarray(rows, dtype=np.int64)
            found = candidates.scan(self._codes[rows], self._scales[rows],
                                    self._code_norm[rows], self._residual[rows], top)
            positions = rows[found]
        scores = exact_scores(self.matrix[positions], query)
        keep = scores >= threshold
        return positions[keep].astype(np.int64), scores[keep]


class _Candidates:
    """One query's int8 side: which rows of a code matrix may reach the threshold."""

    def __init__(self, query: np.ndarray, threshold: float) -> None:
        peak = float(np.abs(query).max())
        self.q_scale = peak / 127.0 if peak > 0 else 1.0
        codes = np.clip(np.rint(query / self.q_scale), -127, 127).astype(np.int8)
        self.q_codes = codes[None, :]
        q64 = query.astype(np.float64)
        q_error = float(np.linalg.norm(q64 - codes.astype(np.float64) * self.q_scale))
        self.q_norm = float(np.linalg.norm(q64))
        # bound_r = code_norm_r * a + residual_r * b + c, sound for the float32 estimate
        self.a = np.float32((q_error + _MARGIN * self.q_norm) * (1 + 1e-6))
        self.b = np.float32(self.q_norm * (1 + 1e-6))
        self.c = np.float32(_MARGIN)
        self.threshold = threshold

    def scan(self, codes: np.ndarray, scales: np.ndarray, code_norm: np.ndarray,
             residual: np.ndarray, top: tuple[int, float] | None = None) -> np.ndarray:
        """Row numbers (into ``codes``) of the candidates, in order (``top``: see
        :meth:`QuantisedScan.above`)."""
        # the loosest bound of any row gives a one-compare filter; each survivor is then
        # checked against its own bound
        largest = float(code_norm.max())
        widest = largest * float(self.a) + float(residual.max()) * float(self.b) + \
            float(self.c)
        slack = _MARGIN * (abs(self.threshold) + largest * self.q_norm)  # float32 sums
        cut = np.float32((self.threshold - widest - slack) / self.q_scale)
        out_dtype = "float32" if codes.shape[1] * 127 * 127 < 2**24 else "float64"

        def block(start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            stop = min(start + BLOCK_ROWS, len(codes))
            products = np.empty((1, stop - start), out_dtype)  # exact integer sums
            if numkong is None:
                products[0] = codes[start:stop].astype(np.int32) @ \
                    self.q_codes[0].astype(np.int32)
            else:
                numkong.cdist(self.q_codes, codes[start:stop], metric="dot", out=products,
                              out_dtype=out_dtype)
            estimate = products[0]
            estimate *= scales[start:stop]
            loose = np.flatnonzero(estimate >= cut)
            at = loose + start
            bound = code_norm[at] * self.a + residual[at] * self.b + self.c
            value = estimate[loose] * np.float32(self.q_scale)
            close = value + bound >= self.threshold
            return at[close], value[close], bound[close]

        starts = range(0, len(codes), BLOCK_ROWS)
        if len(starts) == 1:
            at, value, bound = block(0)
        else:
            at, value, bound = (np.concatenate(part) for part in
                                zip(*_POOL.map(block, starts), strict=True))
        if top is None or len(at) <= top[0]:
            return at
        return at[_best(value, bound, *top)]


def _best(value: np.ndarray, bound: np.ndarray, count: int, ceiling: float) -> np.ndarray:
    """Which candidates may score at least the ``count``-th best score or ``ceiling``.

    A row whose upper bound is below the ``count``-th largest lower bound has ``count``
    rows surely above it. Left out are only rows at least ``_GAP`` below both, so that
    scaling the scores afterwards (float64, by a factor far from 0) cannot round a left
    out row into a tie with a kept one.
    """
    value, bound = value.astype(np.float64), bound.astype(np.float64)
    rounding = _MARGIN * (1.0 + np.abs(value))  # the float32 estimate's, as in the cut
    lower, upper = value - bound - rounding, value + bound + rounding
    kth = np.partition(lower, len(lower) - count)[len(lower) - count]
    return upper >= min(kth, ceiling) - _GAP
