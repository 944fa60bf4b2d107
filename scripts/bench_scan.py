"""The server's threshold scan at scale, beside the exact float32 scan of the same run.
Prints figures; asserts nothing (``scripts/bench_speed.py`` prints these rows too).

    .venv/bin/python scripts/bench_scan.py [--sizes 100000 1000000] [--repeat 15]

Two kinds of synthetic unit vectors of 384 dimensions:
- isotropic: Gaussian directions (the hard case for a quantised scan's bound: scores
  crowd near the threshold);
- MiniLM-like: anisotropic like all-MiniLM-L6-v2 sentence embeddings, whose mean has
  norm ~0.43 and whose covariance spectrum falls off as (rank + 3)**-1.34 (fitted once on
  ~1,800 embedded docstrings: pairwise cosine 0.18 +- 0.19), in a random basis.

The threshold is each query's 50th best exact score, so a boundary row is included;
"same" says the scan returned exactly the rows the exact scan returns. Wall times are
p50/p90 over the repeats; "cpu" is the process CPU time per query (both threads), the
figure a busy shared machine inflates least. The load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kg_fuse.server.search.scan import QuantisedScan, exact_scores  # noqa: E402

DIMS = 384
MEAN_NORM = 0.43
SPECTRUM_POWER = 1.34
SPECTRUM_OFFSET = 3.0
CENTRED_VARIANCE = 1 - MEAN_NORM**2


def isotropic(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = rng.standard_normal((n, DIMS), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


class MiniLMLike:
    """Unit vectors around a common mean with a power-law spectrum in a random basis."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        basis, _ = np.linalg.qr(rng.standard_normal((DIMS, DIMS)))
        spread = (np.arange(1, DIMS + 1) + SPECTRUM_OFFSET) ** -SPECTRUM_POWER
        spread *= CENTRED_VARIANCE / spread.sum()
        self.mix = (np.sqrt(spread)[:, None] * basis.T).astype(np.float32)
        self.mean = (basis[:, 0] * MEAN_NORM).astype(np.float32)

    def __call__(self, n: int) -> np.ndarray:
        rows = np.empty((n, DIMS), np.float32)
        for start in range(0, n, 65_536):
            part = self.rng.standard_normal((min(65_536, n - start), DIMS), np.float32)
            part = part @ self.mix + self.mean
            rows[start:start + len(part)] = part / np.linalg.norm(part, axis=1,
                                                                  keepdims=True)
        return rows


def timed(fn, repeat: int) -> tuple[float, float, float]:
    """p50 and p90 wall seconds, and the median process CPU seconds, of ``fn``."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        started, used = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
    return (float(np.percentile(wall, 50)), float(np.percentile(wall, 90)),
            float(np.median(cpu)))


def scan_figures(kind: str, n: int, repeat: int, seed: int = 0) -> dict[str, object]:
    rng = np.random.default_rng(seed + n)
    if kind == "isotropic":
        matrix = isotropic(rng, n)
        query = matrix[7] * 0.6 + rng.standard_normal(DIMS, dtype=np.float32) * 0.03
        query /= np.linalg.norm(query)
    else:
        sample = MiniLMLike(rng)
        matrix, query = sample(n), sample(1)[0]
    threshold = float(np.sort(exact_scores(matrix, query))[-50])
    want = np.flatnonzero(exact_scores(matrix, query) >= threshold)
    started = time.perf_counter()
    scan = QuantisedScan(matrix)
    build = time.perf_counter() - started
    load = os.getloadavg()[0]
    exact = timed(lambda: np.flatnonzero(matrix @ query >= threshold), max(3, repeat // 3))
    fast = timed(lambda: scan.above(query, threshold), repeat)
    got = scan.above(query, threshold)[0]
    return {"kind": kind, "n": n, "fast": fast, "exact": exact, "build": build,
            "same": np.array_equal(got, want), "results": len(want),
            "extra": scan.nbytes, "matrix": matrix.nbytes,
            "load": (load + os.getloadavg()[0]) / 2}


def rows_for(fig: dict[str, object]) -> list[list[str]]:
    """Table rows (measure, kg-fuse, reference, ratio) for ``bench_speed``."""
    fast, exact = fig["fast"], fig["exact"]
    n, per_row = fig["n"], fig["extra"] / fig["n"]
    same = "" if fig["same"] else " RESULTS DIFFER"
    return [
        [f"scan p50/p90 {fig['kind']}, {n:,} x {DIMS}",
         f"{fast[0] * 1e3:.1f}/{fast[1] * 1e3:.1f} ms (cpu {fast[2] * 1e3:.1f})",
         f"exact f32 {exact[0] * 1e3:.1f}/{exact[1] * 1e3:.1f} ms (cpu {exact[2] * 1e3:.1f})",
         f"{fast[0] / exact[0]:.2f}x p50, cpu {fast[2] / exact[2]:.2f}x{same}"],
        [f"  memory, build, load, {n:,}",
         f"+{fig['extra'] / 2**20:.0f} MiB ({per_row:.0f} B/row), {fig['build']:.1f} s",
         f"f32 matrix {fig['matrix'] / 2**20:.0f} MiB", f"load avg {fig['load']:.1f}"],
    ]


def scan_rows(repeat: int, sizes: tuple[int, ...] = (100_000, 1_000_000),
              kinds: tuple[str, ...] = ("isotropic", "minilm")) -> list[list[str]]:
    rows: list[list[str]] = []
    for n in sizes:
        for kind in kinds:
            rows += rows_for(scan_figures(kind, n, repeat))
    return rows


def print_table(header: list[str], rows: list[list[str]]) -> None:
    """Columns padded to their widest cell, a rule under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--kinds", nargs="+", default=["isotropic", "minilm"])
    parser.add_argument("--repeat", type=int, default=15)
    opts = parser.parse_args(argv)
    rows = scan_rows(opts.repeat, tuple(opts.sizes), tuple(opts.kinds))
    print_table(["measure", "kg-fuse", "reference (same run)", "ratio"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
