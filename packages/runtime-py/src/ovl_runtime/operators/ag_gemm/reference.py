"""AllGather+GEMM's numpy reference: every rank's ``A`` gathered, times this rank's ``B``."""

from __future__ import annotations

import numpy as np

from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, gathered


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    K, N = m.reference.K, m.reference.N
    full = gathered(m, f64, "A", K)
    return [full @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B") for r in range(m.world)]
