"""AllGather+GEMM's backward: ``y = AG(x) @ w`` → ``dx = RS(dy @ wᵀ)`` (the dual operator, GEMM+ReduceScatter),
``dw = AG(x)ᵀ @ dy``; where ``w`` needs a gradient the Python function records ``all_gather_matmul_gathered``, whose
second output is ``AG(x)`` copied from the kernel's own buffer, kept for ``dw`` instead of gathered again.
Registered with ``torch.library`` on import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..._torch_api.backward import save_moved, save_operands, t
from ..._torch_api.collectives import gather_rows
from ...groups import Group, resolve_group
from ..gemm_rs import op as _gemm_rs_op  # noqa: F401 - registers ovl::matmul_reduce_scatter, the input gradient's operator
from . import op as _op  # noqa: F401 - registers the ops whose backward this module registers


def ag_mm_grads(ctx: Any, dy: torch.Tensor, w: torch.Tensor, g: Group, gathered: Callable[[], torch.Tensor]) -> tuple[Any, ...]:
    """AllGather+GEMM's gradients where needed: ``dx = RS(dy @ wᵀ)`` by GEMM+ReduceScatter, ``dw = AG(x)ᵀ @ dy``
    with ``AG(x)`` from ``gathered`` (called only for ``dw``)."""
    dx = torch.ops.ovl.matmul_reduce_scatter(dy, t(w), g.name) if ctx.needs_input_grad[0] else None
    dw = gathered().transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _all_gather_matmul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    return ag_mm_grads(ctx, dy.contiguous(), w, g, lambda: gather_rows(x, g))


def _all_gather_matmul_gathered_backward(ctx: Any, dy: torch.Tensor | None, _dgathered: Any) -> tuple[Any, ...]:
    gathered, w = ctx.saved_tensors
    if dy is None:
        return None, None, None
    return ag_mm_grads(ctx, dy.contiguous(), w, resolve_group(ctx.group_name), lambda: gathered)


torch.library.register_autograd("ovl::all_gather_matmul", _all_gather_matmul_backward, setup_context=save_operands)
torch.library.register_autograd("ovl::all_gather_matmul_gathered", _all_gather_matmul_gathered_backward, setup_context=save_moved)
