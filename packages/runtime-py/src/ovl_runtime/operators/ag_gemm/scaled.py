"""AllGather+GEMM on fp8 e4m3 operands with per-tensor scales: ``ovl::all_gather_scaled_matmul`` (``cat(x over
ranks) @ w · scale_a · scale_b``, bf16), the ``fp8e4m3`` operator of the kernel library, with its fake. Inference only:
no autograd is registered, and a call that would need one is refused before any launch (:mod:`.._torch_api.fp8`)."""

from __future__ import annotations

import torch

from ..._kernels.library import call_key
from ..._torch_api.fp8 import FP8_KEY, fp8_operands
from ..._torch_api.registry import Bound, bound_operator, checked_call
from ..._torch_api.tensors import fake_rows
from ...groups import resolve_group

#: The output's element type (the kernel's C).
OUT_DTYPE = torch.bfloat16


def _all_gather_scaled_matmul_impl(
    x: torch.Tensor, w: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, group_name: str
) -> torch.Tensor:
    g = resolve_group(group_name)
    what = "all_gather_matmul"
    # Checked on every call (the scales' values and addresses may change; their checks are cheap), the kernel key once per signature.
    bt, sa, sb, m, k, n = fp8_operands(x, w, scale_a, scale_b, g, what)
    M = g.world * m

    def build() -> tuple[Bound, tuple[int, int, int]]:
        return bound_operator(call_key("ag-gemm", g.world, M, n, k, FP8_KEY), g, what), (M, n, k)

    op, _shape = checked_call(("ag-gemm-fp8", g.name, x.shape, w.shape, x.dtype, x.device), (x, bt), build)
    out = torch.empty((g.world, M, n) if g.stacked else (M, n), dtype=OUT_DTYPE, device=x.device)
    op.run({"A": x, "B": bt, "scale_a": sa, "scale_b": sb}, out)
    return out


@torch.library.custom_op("ovl::all_gather_scaled_matmul", mutates_args=())
def _ag_scaled_mm_op(x: torch.Tensor, w: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_gather_scaled_matmul_impl(x, w, scale_a, scale_b, group_name)


@_ag_scaled_mm_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, group_name: str) -> torch.Tensor:
    g, m = fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], g.world * m, w.shape[-1]), dtype=OUT_DTYPE)
