"""Exact threshold search at scale: an int8 scan finds candidates, float32 decides.

A search keeps the rows whose score ``row . query`` is at least a threshold. Reading the
float32 matrix is the cost (1.5 KiB a row at 384 dimensions), so the scan reads an int8
copy instead (a quarter of the bytes, integer SIMD) and rescores only the candidates
with the exact float32 product. No true result is lost, because the int8 estimate's
error is bounded per row:

    row   = s_r * c_r + e_r      (c_r int8, s_r its scale, e_r the rounding error)
    query = s_q * c_q + f        (the query is quantised the same way)
    row . query = s_r s_q (c_r . c_q) + s_r (c_r . f) + e_r . query
    |error| <= s_r |c_r| |f| + |e_r| |query|          (Cauchy-Schwarz)

so every row whose estimate plus its bound reaches the threshold is a candidate, and the
rescoring keeps exactly those whose score (the float64 product of the float32 row and
query, so no BLAS rounding decides a tie at the boundary) reaches it. Rows may have any norm
(fused multi-view vectors); the query should be unit length (any norm is handled).

Memory: one int8 byte per dimension plus 12 bytes per row (scale, two bound terms):
37 MiB for 100k rows of 384 dimensions, 378 MiB for 1M, next to the float32 matrix
(147 MiB / 1.43 GiB) that the rescoring reads only at the candidates' rows.

Updates are cheap: ``append`` quantises only the new rows, ``delete`` drops rows.
"""

from __future__ import annotations

import concurrent.futures
import logging

import numpy as np

log = logging.getLogger(__name__)

try:  # torch ships with the server extra (sentence-transformers); its int8 GEMM is SIMD
    import torch

    _HAVE_INT_MM = hasattr(torch, "_int_mm")
except ImportError:  # pragma: no cover - the server extra always has it
    torch = None
    _HAVE_INT_MM = False

CHUNK_ROWS = 65_536  # rows per int8 product (two threads share a large scan)
_EPSILON = 1e-5  # float32 rounding of the estimate itself
_POOL = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="scan")


def _quantise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """int8 codes, scales, and the two per-row bound terms (|c_r| s_r, |e_r|)."""
    rows = np.asarray(rows, dtype=np.float32)
    peak = np.abs(rows).max(axis=1) if rows.size else np.zeros(len(rows), np.float32)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(rows / scales[:, None]), -127, 127).astype(np.int8)
    decoded = codes.astype(np.float32) * scales[:, None]
    residual = np.linalg.norm(rows - decoded, axis=1).astype(np.float32)
    code_norm = (np.linalg.norm(codes.astype(np.float32), axis=1) * scales).astype(np.float32)
    return codes, scales, code_norm, residual


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
        rows = np.asarray(rows, dtype=np.float32).reshape(-1, self.matrix.shape[1])
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

    def _products(self, query_codes: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """c_r . c_q for every row (or the given rows), as int32."""
        codes = self._codes if rows is None else self._codes[rows]
        if not _HAVE_INT_MM or len(codes) < 32:
            return codes.astype(np.int32) @ query_codes.astype(np.int32)
        right = torch.zeros((codes.shape[1], 8), dtype=torch.int8)
        right[:, 0] = torch.from_numpy(query_codes)

        def part(start: int) -> np.ndarray:
            block = torch.from_numpy(codes[start:start + CHUNK_ROWS])
            if len(block) < 32:  # the kernel wants more than 16 rows
                return codes[start:start + CHUNK_ROWS].astype(np.int32) @ \
                    query_codes.astype(np.int32)
            return torch._int_mm(block, right)[:, 0].numpy()

        starts = range(0, len(codes), CHUNK_ROWS)
        if len(starts) == 1:
            return part(0)
        return np.concatenate(list(_POOL.map(part, starts)))

    def above(self, query: np.ndarray, threshold: float, rows: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """Positions (into the matrix) and exact scores (float64 products of the float32
        rows) of the rows scoring at least ``threshold``, in position order; ``rows``
        restricts the scan to a subset."""
        if len(self.matrix) == 0 or (rows is not None and len(rows) == 0):
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        query = np.asarray(query, dtype=np.float32)
        peak = float(np.abs(query).max())
        q_scale = peak / 127.0 if peak > 0 else 1.0
        q_codes = np.clip(np.rint(query / q_scale), -127, 127).astype(np.int8)
        q_error = float(np.linalg.norm(query - q_codes.astype(np.float32) * q_scale))
        q_norm = float(np.linalg.norm(query))
        products = self._products(q_codes, rows)
        pick = slice(None) if rows is None else rows
        estimate = products.astype(np.float32) * (self._scales[pick] * np.float32(q_scale))
        bound = self._code_norm[pick] * np.float32(q_error) + \
            self._residual[pick] * np.float32(q_norm) + np.float32(_EPSILON)
        candidates = np.nonzero(estimate + bound >= np.float32(threshold))[0]
        positions = candidates if rows is None else np.asarray(rows)[candidates]
        scores = exact_scores(self.matrix[positions], query)
        keep = scores >= threshold
        return positions[keep].astype(np.int64), scores[keep]
