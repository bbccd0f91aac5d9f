"""The collectives' numpy references over their single input (conventionally ``X``): ``all-gather`` every rank's
rows on every rank, ``all-reduce`` their sum on every rank, ``reduce-scatter`` each rank's slab of the sum."""

from __future__ import annotations

import numpy as np

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.arrays import as_matrix, shard, slab


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    ref = m.reference
    world, M, N = m.world, ref.M, ref.N
    (key,) = ref.inputs.keys()
    where = f"reference.inputs.{key}"
    if ref.operator == "all-gather":
        full = np.concatenate([shard(m, f64[r][key], r, N, where) for r in range(world)], axis=0)
        return [full for _ in range(world)]
    total = sum(as_matrix(f64[r][key], (M,), N, where) for r in range(world))
    assert isinstance(total, np.ndarray)
    if ref.operator == "all-reduce":
        return [total for _ in range(world)]
    return [slab(total, *rank_rows(m, r)) for r in range(world)]
