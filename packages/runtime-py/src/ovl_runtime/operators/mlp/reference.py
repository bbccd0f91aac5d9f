"""The MLP's first stage (``ag-gemm-silu``) numpy reference: ``silu(X W[:, :N]) · (X W[:, N:])`` with ``X`` every
rank's ``A`` gathered and ``W`` this rank's ``B`` ``[K, 2N]``."""

from __future__ import annotations

import numpy as np

from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, gathered


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    K, N = m.reference.K, m.reference.N
    full = gathered(m, f64, "A", K)
    outs = []
    for r in range(m.world):
        w = as_matrix(f64[r]["B"], (K,), 2 * N, "reference.inputs.B")
        gate, up = full @ w[:, :N], full @ w[:, N:]
        outs.append(gate / (1.0 + np.exp(-gate)) * up)
    return outs
