"""The MLP's first stage as a torch.library op: ``ovl::all_gather_matmul_silu_mul`` (AllGather + gate/up GEMM with the
SiLU-mul epilogue, the built-in ``gemm_silu_mul`` body compiled as ``ag-gemm-silu``) and its fake."""

from __future__ import annotations

import torch

from ..._kernels.library import KernelKey
from ..._torch_api.registry import Bound, bound_operator, checked_call
from ..._torch_api.tensors import DTYPES, empty_rows, gemm_operands
from ...errors import UsageError
from ...groups import resolve_group


def intermediate(w_gate_up: torch.Tensor) -> int:
    """I of ``w_gate_up`` ``[hidden, 2·I]``, checked."""
    n2 = w_gate_up.shape[-1]
    if n2 % 2:
        raise UsageError(f"all_gather_matmul_silu_mul: w_gate_up is {list(w_gate_up.shape)}; it must be [hidden, 2·I] ([W_gate | W_up])")
    return n2 // 2


def _ag_silu_impl(x: torch.Tensor, w_gate_up: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)

    def build() -> tuple[Bound, tuple[int, int]]:
        _xs, _ws, m, k, _n2 = gemm_operands(x, w_gate_up, g, "all_gather_matmul_silu_mul")
        inter = intermediate(w_gate_up)
        key = KernelKey("ag-gemm-silu", g.world, g.world * m, inter, k, DTYPES[x.dtype])
        return bound_operator(key, g, "all_gather_matmul_silu_mul"), (g.world * m, inter)

    sig = ("ag-gemm-silu", g.name, x.shape, w_gate_up.shape, x.dtype, x.device)
    op, (rows, inter) = checked_call(sig, (x, w_gate_up), build)
    out = empty_rows(g, rows, inter, x)
    op.run({"A": x, "B": w_gate_up}, out)
    return out


@torch.library.custom_op("ovl::all_gather_matmul_silu_mul", mutates_args=())
def _ag_silu_op(x: torch.Tensor, w_gate_up: torch.Tensor, group_name: str) -> torch.Tensor:
    return _ag_silu_impl(x, w_gate_up, group_name)


@_ag_silu_op.register_fake
def _(x: torch.Tensor, w_gate_up: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    return x.new_empty((*x.shape[:-2], g.world * x.shape[-2], w_gate_up.shape[-1] // 2))
