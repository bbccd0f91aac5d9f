"""GEMM+AllReduce's backward: ``y = Σ_ranks x @ w`` on every rank → ``dx = dy @ wᵀ``, ``dw = xᵀ @ dy`` (a replicated
output's gradient is the same on every rank, so the AllReduce's backward is the identity, as in a row-parallel
linear layer). Registered with ``torch.library`` on import."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.backward import save_operands
from . import op as _op  # noqa: F401 - registers the op whose backward this module registers


def _matmul_all_reduce_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    dx = dy @ w.transpose(-1, -2) if ctx.needs_input_grad[0] else None
    dw = x.transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


torch.library.register_autograd("ovl::matmul_all_reduce", _matmul_all_reduce_backward, setup_context=save_operands)
