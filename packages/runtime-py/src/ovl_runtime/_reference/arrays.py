"""What the numpy references share: a buffer read as a matrix, a rank's slab of a row-sharded matrix, and the
relative error. Conventions (``reference.inputs`` keys): GEMM operators read ``A`` and ``B``; collectives read their
single input (conventionally ``X``). A row-sharded input or output buffer may hold either just its rank's rows or
the whole ``M`` rows, of which the rank's slab is meant; the shards are equal (``rowsPerRank``) or uneven
(``rowCounts``: see :mod:`ovl_runtime._manifest.shards`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._manifest.shards import rank_rows
from .._manifest.types import Manifest
from ..errors import ManifestError


def as_matrix(arr: np.ndarray, rows: Sequence[int], cols: int, where: str) -> np.ndarray:
    """View ``arr`` as ``[r, cols]`` for the first ``r`` in ``rows`` that its size matches."""
    for r in rows:
        if arr.size == r * cols:
            return arr.reshape(r, cols)
    shapes = " or ".join(f"{r}x{cols}" for r in rows)
    raise ManifestError(where, f"buffer of {arr.size} elements cannot be read as {shapes}")


def slab(mat: np.ndarray, first: int, rows: int) -> np.ndarray:
    """A rank's rows (``first`` onward, ``rows`` of them) of a row-sharded matrix given
    either whole or as the slab itself."""
    if mat.shape[0] == rows:
        return mat
    return mat[first : first + rows]


def shard(m: Manifest, arr: np.ndarray, rank: int, cols: int, where: str) -> np.ndarray:
    """``rank``'s shard of a row-sharded buffer (its rows, or all M rows), as a matrix."""
    first, rows = rank_rows(m, rank)
    return slab(as_matrix(arr, (m.reference.M, rows), cols, where), first, rows)


def gathered(m: Manifest, f64: list[dict[str, np.ndarray]], key: str, cols: int) -> np.ndarray:
    """Every rank's shard of the row-sharded input ``key``, in rank order: all ``M`` rows."""
    return np.concatenate([shard(m, f64[r][key], r, cols, f"reference.inputs.{key}") for r in range(m.world)], axis=0)


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖ / ‖ref‖ (Frobenius); NaN when ``out`` holds NaN or inf (an unwritten element)."""
    o = out.astype(np.float64)
    if not np.isfinite(o).all():
        return math.nan
    diff = float(np.linalg.norm(o - ref))
    norm = float(np.linalg.norm(ref))
    return diff / norm if norm > 0 else diff
