"""MoE part 1's numpy reference: ``C[t·k + j] = x_all[t] @ w[topk_ids[t, j]]``, every rank's tokens gathered."""

from __future__ import annotations

import numpy as np

from ..._manifest.types import Manifest
from ..._reference.arrays import gathered


def moe_matmul(x: np.ndarray, w: np.ndarray, topk_ids: np.ndarray) -> np.ndarray:
    """``C[t·k + j] = x[t] @ w[topk_ids[t, j]]`` (``w`` [E, K, N]), expert by expert."""
    T, k = topk_ids.shape
    c = np.zeros((T * k, w.shape[2]), dtype=np.result_type(x, w))
    flat = topk_ids.reshape(-1)
    for e in np.unique(flat):
        slots = np.nonzero(flat == e)[0]
        c[slots] = x[slots // k] @ w[int(e)]
    return c


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    full = gathered(m, f64, "A", K)
    w = [f64[r]["B"].reshape(-1, K, N) for r in range(m.world)]
    return [moe_matmul(full, w[r], inputs[r]["topk"].reshape(M, -1).astype(np.int64)) for r in range(m.world)]
