"""Numpy references of the operators a manifest claims, and the relative-error check.

Conventions (``reference.inputs`` keys): GEMM operators read ``A`` and ``B``; collectives
read their single input (conventionally ``X``). ``a2a-gemm`` reads ``A`` as each rank's
AllToAll send buffer [M, K] (slab j goes to rank j) and multiplies what a rank receives by
its ``B``. ``ag-grouped-gemm`` (the MoE expert GEMM)
reads ``A`` [M, K] and ``B`` [E, K, N], and finds the expert of each global m-block in the
manifest table ``reference.groupTable`` (a table, not a buffer: the same row on every rank,
of L entries, an m-block being M / L rows). ``ag-attention`` reads ``Q`` and ``KV`` (see
``attention``); its output, like Q, is each rank's rows. A row-sharded input or output buffer may
hold either just its rank's rows or the whole ``M`` rows, of which the rank's slab is meant;
the shards are equal (``rowsPerRank``) or uneven (``rowCounts``: see ``shards``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .attention import attention, attention_spec
from .errors import ManifestError
from .manifest import Manifest
from .moe import moe_matmul, moe_rs_partial
from .shards import rank_rows


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


def expert_blocks(m: Manifest) -> tuple[int, list[int]]:
    """ag-grouped-gemm: the rows of one m-block and the expert of every global m-block."""
    ref = m.reference
    row = [int(e) for e in m.table(ref.group_table or "").values[0]]
    return ref.M // len(row), row


def expert_runs(experts: Sequence[int], block_rows: int) -> list[tuple[int, int, int]]:
    """``(first row, end row, expert)`` of each run of consecutive m-blocks of one expert."""
    runs: list[tuple[int, int, int]] = []
    for mb, e in enumerate(experts):
        if runs and runs[-1][2] == e:
            runs[-1] = (runs[-1][0], (mb + 1) * block_rows, e)
        else:
            runs.append((mb * block_rows, (mb + 1) * block_rows, int(e)))
    return runs


def grouped_matmul(a: np.ndarray, b: np.ndarray, block_rows: int, experts: Sequence[int]) -> np.ndarray:
    """``C[rows of m-block mb] = A[rows] @ B[experts[mb]]`` with ``b`` [E, K, N]."""
    c = np.zeros((a.shape[0], b.shape[2]), dtype=np.result_type(a, b))
    for lo, hi, e in expert_runs(experts, block_rows):
        c[lo:hi] = a[lo:hi] @ b[e]
    return c


def received_slabs(sends: Sequence[np.ndarray], rank: int) -> np.ndarray:
    """a2a-gemm: what ``rank`` receives in an AllToAll of rows, slab q of it being slab
    ``rank`` of rank q's send buffer (``world`` equal slabs of M rows)."""
    world = len(sends)
    rows = sends[0].shape[0] // world
    return np.concatenate([s[rank * rows : (rank + 1) * rows] for s in sends], axis=0)


def references(m: Manifest, inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from each rank's input buffers.

    ``inputs[rank]`` maps the keys of ``reference.inputs`` to that rank's buffer contents
    as they were when the launch started.
    """
    ref = m.reference
    world, M, N, K = m.world, ref.M, ref.N, ref.K
    f64 = [{k: v.astype(np.float64) for k, v in d.items()} for d in inputs]
    if ref.operator == "ag-gemm":
        full = np.concatenate([shard(m, f64[r]["A"], r, K, "reference.inputs.A") for r in range(world)], axis=0)
        return [full @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B") for r in range(world)]
    if ref.operator == "ag-gemm-silu":
        full = np.concatenate([shard(m, f64[r]["A"], r, K, "reference.inputs.A") for r in range(world)], axis=0)
        outs = []
        for r in range(world):
            w = as_matrix(f64[r]["B"], (K,), 2 * N, "reference.inputs.B")
            gate, up = full @ w[:, :N], full @ w[:, N:]
            outs.append(gate / (1.0 + np.exp(-gate)) * up)
        return outs
    if ref.operator == "a2a-gemm":
        sends = [as_matrix(f64[q]["A"], (M,), K, "reference.inputs.A") for q in range(world)]
        return [received_slabs(sends, r) @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B") for r in range(world)]
    if ref.operator == "ag-grouped-gemm":
        full = np.concatenate([shard(m, f64[r]["A"], r, K, "reference.inputs.A") for r in range(world)], axis=0)
        bm, experts = expert_blocks(m)
        outs = []
        for r in range(world):
            b = f64[r]["B"]
            outs.append(
                grouped_matmul(full, as_matrix(b, (b.size // (K * N),), K * N, "reference.inputs.B").reshape(-1, K, N), bm, experts)
            )
        return outs
    if ref.operator == "ag-attention":
        a = attention_spec(m)
        kv = np.concatenate([shard(m, f64[r]["KV"], r, K, "reference.inputs.KV") for r in range(world)], axis=0)
        return [attention(shard(m, f64[r]["Q"], r, N, "reference.inputs.Q"), kv, a, rank_rows(m, r)[0]) for r in range(world)]
    if ref.operator == "ag-moe":
        full = np.concatenate([shard(m, f64[r]["A"], r, K, "reference.inputs.A") for r in range(world)], axis=0)
        w = [f64[r]["B"].reshape(-1, K, N) for r in range(world)]
        return [moe_matmul(full, w[r], inputs[r]["topk"].reshape(M, -1).astype(np.int64)) for r in range(world)]
    if ref.operator == "moe-rs":
        parts = [
            moe_rs_partial(
                as_matrix(f64[r]["A"], (f64[r]["A"].size // K,), K, "reference.inputs.A"),
                f64[r]["B"].reshape(-1, K, N),
                inputs[r]["topk"].reshape(M, -1).astype(np.int64),
                f64[r]["weights"].reshape(M, -1),
            )
            for r in range(world)
        ]
        moe_total = np.sum(parts, axis=0)
        return [slab(moe_total, *rank_rows(m, r)) for r in range(world)]
    if ref.operator in ("gemm-rs", "gemm-ar"):
        total = sum(
            as_matrix(f64[r]["A"], (M,), K, "reference.inputs.A") @ as_matrix(f64[r]["B"], (K,), N, "reference.inputs.B")
            for r in range(world)
        )
        assert isinstance(total, np.ndarray)
        if ref.operator == "gemm-ar":
            return [total for _ in range(world)]
        return [slab(total, *rank_rows(m, r)) for r in range(world)]
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


def output_view(m: Manifest, out: np.ndarray, rank: int) -> np.ndarray:
    """The part of a rank's output buffer the reference describes."""
    ref = m.reference
    if ref.operator in ("gemm-rs", "reduce-scatter", "ag-attention", "moe-rs"):
        return shard(m, out, rank, ref.N, "reference.output")
    if ref.operator == "ag-moe":
        return as_matrix(out, (out.size // ref.N,), ref.N, "reference.output")
    return as_matrix(out, (ref.M,), ref.N, "reference.output")


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """‖out − ref‖ / ‖ref‖ (Frobenius); NaN when ``out`` holds NaN or inf (an unwritten element)."""
    o = out.astype(np.float64)
    if not np.isfinite(o).all():
        return math.nan
    diff = float(np.linalg.norm(o - ref))
    norm = float(np.linalg.norm(ref))
    return diff / norm if norm > 0 else diff
