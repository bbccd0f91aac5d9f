"""GEMM+AllReduce's torch.library op ``ovl::matmul_all_reduce`` and its fake. By default one operator serves every row
count of its range (``call_key``: M a run-time argument; below the compiler's crossover it runs the matmul then the
group's all-reduce), rows padded with zeros to a multiple of the world. Otherwise (``OVL_ANY_ROWS=0``, or M past the
range) each rank owns (reduces and sends) ``M / world`` rows in whole ``RS_ROW_BLOCK``-row blocks: zero rows pad the
tail. The padding rows' sums are dropped."""

from __future__ import annotations

import math

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import Bound, bound_operator, checked_call
from ..._torch_api.tensors import DTYPES, RS_ROW_BLOCK, empty_rows, gemm_operands, pad_rows
from ...groups import resolve_group


def _matmul_all_reduce_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    what = "matmul_all_reduce"

    def build() -> tuple[Bound, tuple[int, int, int]]:
        _xs, _ws, rows, k, n = gemm_operands(x, w, g, what)
        # Each rank owns (reduces and sends) M / world rows in whole 128-row blocks: zero rows pad
        # the tail (their sums are dropped).
        block = g.world * RS_ROW_BLOCK
        padded = math.ceil(rows / block) * block
        # The key the model's kernel list names too (``_models.kernels``); the operator for every row count takes
        # the rows padded to a multiple of the world only.
        key = call_key("gemm-ar", g.world, padded, n, k, DTYPES[x.dtype])
        if key.rows:
            padded = math.ceil(rows / g.world) * g.world
        return bound_operator(key, g, what), (rows, padded, n)

    op, (rows, padded, n) = checked_call(("gemm-ar", g.name, x.shape, w.shape, x.dtype, x.device), (x, w), build)
    out = empty_rows(g, padded, n, x)
    op.run({"A": pad_rows(x, padded), "B": w}, out)
    return out if padded == rows else out[..., :rows, :].contiguous()


@torch.library.custom_op("ovl::matmul_all_reduce", mutates_args=())
def _mm_ar_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _matmul_all_reduce_impl(x, w, group_name)


@_mm_ar_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], w.shape[-1]))
