"""Sequence-parallel attention's numpy reference: each rank's ``Q`` rows against every rank's ``KV`` (gathered), the
attention of :mod:`.spec`; the output, like ``Q``, is each rank's rows."""

from __future__ import annotations

import numpy as np

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.arrays import gathered, shard
from .spec import attention, attention_spec


def reference(m: Manifest, f64: list[dict[str, np.ndarray]], inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from every rank's inputs (``f64``: as float64; ``inputs``: as given)."""
    a = attention_spec(m)
    kv = gathered(m, f64, "KV", m.reference.K)
    return [attention(shard(m, f64[r]["Q"], r, m.reference.N, "reference.inputs.Q"), kv, a, rank_rows(m, r)[0]) for r in range(m.world)]
