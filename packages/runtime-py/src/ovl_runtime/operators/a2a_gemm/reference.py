"""AllToAll+GEMM's numpy reference: ``A`` is each rank's AllToAll send buffer ``[M, K]`` (slab j goes to rank j);
what a rank receives is multiplied by its ``B``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix


def received_slabs(sends: Sequence[np.ndarray], rank: int) -> np.ndarray:
    """a2a-gemm: what ``rank`` receives in an AllToAll of rows, slab q of it being slab
    ``rank`` of rank q's send buffer (``world`` equal slabs of M rows)."""
    world = len(sends)
    rows = sends[0].shape[0] // world
    return np.concatenate([s[rank * rows : (rank + 1) * rows] for s in sends], axis=0)


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    sends = [as_matrix(f64[q]["A"], (M,), K, "reference.inputs.A") for q in range(m.world)]
    return [received_slabs(sends, r) @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B") for r in range(m.world)]
