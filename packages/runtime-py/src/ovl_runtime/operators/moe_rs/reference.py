"""MoE part 2's numpy reference: the sum over the ranks of each rank's topk-weighted expert products, each rank's
slab of the token rows."""

from __future__ import annotations

import numpy as np

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, slab


def moe_rs_partial(h: np.ndarray, w: np.ndarray, topk_ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """One rank's moe-rs contribution ``[T, N]``: ``Σ_j weights[t, j] · (h[t·k + j] @ w[topk_ids[t, j]])``
    (``h`` [T·k, K], ``w`` [E, K, N]), expert by expert."""
    T, k = topk_ids.shape
    flat = topk_ids.reshape(-1)
    y = np.zeros((T * k, w.shape[2]), dtype=np.result_type(h, w, np.float32))
    for e in np.unique(flat):
        slots = np.nonzero(flat == e)[0]
        y[slots] = h[slots] @ w[int(e)]
    return (y * weights.reshape(-1, 1)).reshape(T, k, -1).sum(axis=1)


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    parts = [
        moe_rs_partial(
            as_matrix(f64[r]["A"], (f64[r]["A"].size // K,), K, "reference.inputs.A"),
            f64[r]["B"].reshape(-1, K, N),
            inputs[r]["topk"].reshape(M, -1).astype(np.int64),
            f64[r]["weights"].reshape(M, -1),
        )
        for r in range(m.world)
    ]
    moe_total = np.sum(parts, axis=0)
    return [slab(moe_total, *rank_rows(m, r)) for r in range(m.world)]
