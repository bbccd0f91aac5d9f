"""ag-grouped-gemm's numpy reference: ``A`` ``[M, K]`` and ``B`` ``[E, K, N]``, the expert of each global m-block from
the manifest table ``reference.groupTable`` (a table, not a buffer: the same row on every rank, of L entries, an
m-block being M / L rows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, gathered


def expert_blocks(m: Manifest) -> tuple[int, list[int]]:
    """ag-grouped-gemm: the rows of one m-block and the expert of every global m-block."""
    ref = m.reference
    row = [int(e) for e in m.table(ref.group_table or "").values[0]]
    return ref.M // len(row), row


def expert_runs(experts: Sequence[int], block_rows: int) -> list[tuple[int, int, int]]:
    """``(first row, end row, expert)`` of each run of consecutive m-blocks of one expert."""
    runs: list[tuple[int, int, int]] = []
    for mb, e in enumerate(experts):
        if runs and runs[-1][2] == e:
            runs[-1] = (runs[-1][0], (mb + 1) * block_rows, e)
        else:
            runs.append((mb * block_rows, (mb + 1) * block_rows, int(e)))
    return runs


def grouped_matmul(a: np.ndarray, b: np.ndarray, block_rows: int, experts: Sequence[int]) -> np.ndarray:
    """``C[rows of m-block mb] = A[rows] @ B[experts[mb]]`` with ``b`` [E, K, N]."""
    c = np.zeros((a.shape[0], b.shape[2]), dtype=np.result_type(a, b))
    for lo, hi, e in expert_runs(experts, block_rows):
        c[lo:hi] = a[lo:hi] @ b[e]
    return c


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    K, N = m.reference.K, m.reference.N
    full = gathered(m, f64, "A", K)
    bm, experts = expert_blocks(m)
    outs = []
    for r in range(m.world):
        b = f64[r]["B"]
        outs.append(grouped_matmul(full, as_matrix(b, (b.size // (K * N),), K * N, "reference.inputs.B").reshape(-1, K, N), bm, experts))
    return outs
