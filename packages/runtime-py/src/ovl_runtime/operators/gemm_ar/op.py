"""GEMM+AllReduce's torch.library op ``ovl::matmul_all_reduce`` and its fake. Each rank owns (reduces and sends)
``M / world`` rows in whole ``RS_ROW_BLOCK``-row blocks: zero rows pad the tail (their sums are dropped)."""

from __future__ import annotations

import math

import torch

from ..._kernels.library import KernelKey
from ..._torch_api.registry import bound_operator
from ..._torch_api.tensors import DTYPES, RS_ROW_BLOCK, empty_rows, gemm_operands, pad_rows, per_rank, rank_views
from ...groups import resolve_group


def _matmul_all_reduce_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    what = "matmul_all_reduce"
    xs, ws, rows, k, n = gemm_operands(x, w, g, what)
    # Each rank owns (reduces and sends) M / world rows in whole 128-row blocks: zero rows pad
    # the tail (their sums are dropped).
    block = g.world * RS_ROW_BLOCK
    padded = math.ceil(rows / block) * block
    if padded != rows:
        xs = rank_views(pad_rows(x, padded), g, "x", 2)
    key = KernelKey("gemm-ar", g.world, padded, n, k, DTYPES[x.dtype])
    op = bound_operator(key, g, what)
    out = empty_rows(g, padded, n, x)
    op.run([{"A": a, "B": b} for a, b in zip(xs, ws)], per_rank(out, g))
    return out if padded == rows else out[..., :rows, :].contiguous()


@torch.library.custom_op("ovl::matmul_all_reduce", mutates_args=())
def _mm_ar_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _matmul_all_reduce_impl(x, w, group_name)


@_mm_ar_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], w.shape[-1]))
