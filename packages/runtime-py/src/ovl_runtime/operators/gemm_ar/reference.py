"""GEMM+AllReduce's numpy reference: the sum over the ranks of ``A @ B``, on every rank."""

from __future__ import annotations

import numpy as np

from ..._manifest.types import Manifest
from ..gemm_rs.reference import summed_products


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    total = summed_products(m, f64)
    return [total for _ in range(m.world)]
