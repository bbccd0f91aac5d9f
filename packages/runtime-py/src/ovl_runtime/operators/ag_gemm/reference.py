"""AllGather+GEMM's numpy reference: every rank's ``A`` gathered, times this rank's ``B``; for fp8 operands
(``scale_a`` and ``scale_b`` among the reference's inputs, B held as Bt ``[N, K]``) times both scales, as
``torch._scaled_mm`` computes it."""

from __future__ import annotations

import numpy as np

from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, gathered

#: The reference inputs an fp8 AllGather+GEMM adds: its per-tensor scales (one value each, the same on every rank).
SCALES = ("scale_a", "scale_b")


def scaled(m: Manifest) -> bool:
    """Whether ``m`` is the fp8 form: B held as Bt ``[N, K]`` and the output scaled by ``scale_a · scale_b``."""
    return all(s in m.reference.inputs for s in SCALES)


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    K, N = m.reference.K, m.reference.N
    full = gathered(m, f64, "A", K)
    if not scaled(m):
        return [full @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B") for r in range(m.world)]
    out = []
    for r in range(m.world):
        b = as_matrix(f64[r]["B"], (N,), K, "reference.inputs.B").T
        scale = float(f64[r]["scale_a"].reshape(-1)[0]) * float(f64[r]["scale_b"].reshape(-1)[0])
        out.append((full @ b) * scale)
    return out
