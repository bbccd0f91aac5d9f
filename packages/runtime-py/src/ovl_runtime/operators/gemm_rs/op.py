"""GEMM+ReduceScatter's torch.library op ``ovl::matmul_reduce_scatter`` and its fake. By default one operator serves
every row count of its range (``call_key``: M a run-time argument, no compile for a new M; below the compiler's
crossover it runs the matmul then the group's reduce-scatter). Otherwise (``OVL_ANY_ROWS=0``, or M past the range)
the operator is compiled for the call's M, each rank's slab padded with zero rows to whole ``RS_ROW_BLOCK``-row
blocks where needed (their sums are dropped)."""

from __future__ import annotations

import math

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import Bound, bound_operator, checked_call
from ..._torch_api.tensors import DTYPES, RS_ROW_BLOCK, empty_rows, fake_rows, gemm_operands
from ...errors import UsageError
from ...groups import resolve_group


def _matmul_reduce_scatter_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)

    def build() -> tuple[Bound, tuple[int, int, int, int]]:
        _xs, _ws, rows, k, n = gemm_operands(x, w, g, "matmul_reduce_scatter")
        if rows % g.world:
            raise UsageError(f"matmul_reduce_scatter: {rows} rows do not split over {g.world} ranks (scatter along rows needs a multiple)")
        slab = rows // g.world
        padded = math.ceil(slab / RS_ROW_BLOCK) * RS_ROW_BLOCK
        # The key the model's kernel list names too (``_models.kernels``); the operator for every row count takes
        # the slab as it is, one compiled for this M whole row blocks.
        key = call_key("gemm-rs", g.world, g.world * padded, n, k, DTYPES[x.dtype])
        if key.rows:
            padded = slab
        return bound_operator(key, g, "matmul_reduce_scatter"), (slab, padded, n, k)

    op, (slab, padded, n, k) = checked_call(("gemm-rs", g.name, x.shape, w.shape, x.dtype, x.device), (x, w), build)
    a = x
    if padded != slab:
        # Each rank's slab padded to whole row blocks with zero rows (their sums are dropped).
        a = torch.zeros((*x.shape[:-2], g.world * padded, k), dtype=x.dtype, device=x.device)
        a.unflatten(-2, (g.world, padded))[..., :slab, :].copy_(x.unflatten(-2, (g.world, slab)))
    out = empty_rows(g, padded, n, x)
    op.run({"A": a, "B": w}, out)
    return out if padded == slab else out[..., :slab, :].contiguous()


@torch.library.custom_op("ovl::matmul_reduce_scatter", mutates_args=())
def _mm_rs_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _matmul_reduce_scatter_impl(x, w, group_name)


@_mm_rs_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g, rows = fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], rows // g.world, w.shape[-1]))
