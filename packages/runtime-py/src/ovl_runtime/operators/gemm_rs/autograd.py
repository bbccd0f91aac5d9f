"""GEMM+ReduceScatter's backward: ``y = RS(x @ w)`` → ``dx = AG(dy) @ wᵀ`` (the dual operator,
``all_gather_matmul_gathered``: ``AG(dy)`` too, for ``dw = xᵀ @ AG(dy)``). Registered with ``torch.library`` on import."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.backward import save_operands, t
from ..._torch_api.collectives import gather_rows
from ...groups import resolve_group
from ..ag_gemm import op as _ag_gemm_op  # noqa: F401 - registers the input gradient's AllGather+GEMM ops
from . import op as _op  # noqa: F401 - registers the op whose backward this module registers


def _matmul_reduce_scatter_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    dy = dy.contiguous()
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dx = gathered = None
    if need_x and need_w:  # AG(dy) @ wᵀ, and AG(dy) itself from the operator's buffer for the weight gradient
        dx, gathered = torch.ops.ovl.all_gather_matmul_gathered(dy, t(w), g.name)
    elif need_x:
        dx = torch.ops.ovl.all_gather_matmul(dy, t(w), g.name)
    dw = x.transpose(-1, -2) @ (gather_rows(dy, g) if gathered is None else gathered) if need_w else None
    return dx, dw, None


torch.library.register_autograd("ovl::matmul_reduce_scatter", _matmul_reduce_scatter_backward, setup_context=save_operands)
