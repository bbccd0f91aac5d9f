"""AllToAll+GEMM's backward: ``y = A2A(x) @ w`` → ``dx = A2A(dy @ wᵀ)`` (AllToAll is its own inverse; a plain
collective), ``dw = A2A(x)ᵀ @ dy``; where ``w`` needs a gradient the Python function records
``all_to_all_matmul_exchanged``, whose second output is ``A2A(x)`` copied from the kernel's own buffer, kept for
``dw`` instead of exchanged again. Registered with ``torch.library`` on import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..._torch_api.backward import save_moved, save_operands
from ..._torch_api.collectives import exchange_slabs
from ...groups import Group, resolve_group
from . import op as _op  # noqa: F401 - registers the ops whose backward this module registers


def _a2a_mm_grads(ctx: Any, dy: torch.Tensor, w: torch.Tensor, g: Group, exchanged: Callable[[], torch.Tensor]) -> tuple[Any, ...]:
    """AllToAll+GEMM's gradients where needed: ``dx = A2A(dy @ wᵀ)``, ``dw = A2A(x)ᵀ @ dy`` with ``A2A(x)`` from
    ``exchanged`` (called only for ``dw``)."""
    dx = exchange_slabs(dy @ w.transpose(-1, -2), g) if ctx.needs_input_grad[0] else None
    dw = exchanged().transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _all_to_all_matmul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    return _a2a_mm_grads(ctx, dy, w, g, lambda: exchange_slabs(x, g))


def _all_to_all_matmul_exchanged_backward(ctx: Any, dy: torch.Tensor | None, _dexchanged: Any) -> tuple[Any, ...]:
    exchanged, w = ctx.saved_tensors
    if dy is None:
        return None, None, None
    return _a2a_mm_grads(ctx, dy, w, resolve_group(ctx.group_name), lambda: exchanged)


torch.library.register_autograd("ovl::all_to_all_matmul", _all_to_all_matmul_backward, setup_context=save_operands)
torch.library.register_autograd("ovl::all_to_all_matmul_exchanged", _all_to_all_matmul_exchanged_backward, setup_context=save_moved)
