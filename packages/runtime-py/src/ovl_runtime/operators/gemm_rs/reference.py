"""GEMM+ReduceScatter's numpy reference: the sum over the ranks of ``A @ B``, each rank's slab of its rows."""

from __future__ import annotations

import numpy as np

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, slab


def summed_products(m: Manifest, f64: list[dict[str, np.ndarray]]) -> np.ndarray:
    """``Σ_ranks A @ B`` ``[M, N]``, each rank's ``A`` ``[M, K]`` and ``B`` ``[K, N]``."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    total = sum(
        as_matrix(f64[r]["A"], (M,), K, "reference.inputs.A") @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B")
        for r in range(m.world)
    )
    assert isinstance(total, np.ndarray)
    return total


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    total = summed_products(m, f64)
    return [slab(total, *rank_rows(m, r)) for r in range(m.world)]
