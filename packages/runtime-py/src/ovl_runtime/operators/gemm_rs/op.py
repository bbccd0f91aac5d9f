"""GEMM+ReduceScatter's torch.library op ``ovl::matmul_reduce_scatter`` and its fake. Each rank's slab is padded
with zero rows to whole ``RS_ROW_BLOCK``-row blocks where needed (their sums are dropped)."""

from __future__ import annotations

import math

import torch

from ..._kernels.library import KernelKey
from ..._torch_api.registry import bound_operator
from ..._torch_api.tensors import DTYPES, RS_ROW_BLOCK, empty_rows, fake_rows, gemm_operands, per_rank, rank_views
from ...errors import UsageError
from ...groups import resolve_group


def _matmul_reduce_scatter_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    xs, ws, rows, k, n = gemm_operands(x, w, g, "matmul_reduce_scatter")
    if rows % g.world:
        raise UsageError(f"matmul_reduce_scatter: {rows} rows do not split over {g.world} ranks (scatter along rows needs a multiple)")
    slab = rows // g.world
    padded = math.ceil(slab / RS_ROW_BLOCK) * RS_ROW_BLOCK
    if padded != slab:
        # Each rank's slab padded to whole row blocks with zero rows (their sums are dropped).
        xp = torch.zeros((*x.shape[:-2], g.world * padded, k), dtype=x.dtype, device=x.device)
        xp.unflatten(-2, (g.world, padded))[..., :slab, :].copy_(x.unflatten(-2, (g.world, slab)))
        xs = rank_views(xp, g, "x", 2)
    key = KernelKey("gemm-rs", g.world, g.world * padded, n, k, DTYPES[x.dtype])
    op = bound_operator(key, g, "matmul_reduce_scatter")
    out = empty_rows(g, padded, n, x)
    op.run([{"A": a, "B": b} for a, b in zip(xs, ws)], per_rank(out, g))
    return out if padded == slab else out[..., :slab, :].contiguous()


@torch.library.custom_op("ovl::matmul_reduce_scatter", mutates_args=())
def _mm_rs_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _matmul_reduce_scatter_impl(x, w, group_name)


@_mm_rs_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g, rows = fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], rows // g.world, w.shape[-1]))
