"""What the GEMM operators' backward passes share: the context they keep (``x``, ``w``, the group's name; or the
moved ``x`` an operator returned beside its output) and ``wᵀ`` for the dual operator."""

from __future__ import annotations

from typing import Any

import torch

from .transpose import transposed


def t(w: torch.Tensor) -> torch.Tensor:
    """``wᵀ`` for the dual operator, moved in tiles (:mod:`ovl_runtime._torch_api.transpose`)."""
    return transposed(w)


def save_operands(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``x`` and ``w`` (the first two inputs) and the group's name (the third)."""
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.group_name = inputs[2]


def save_moved(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``w`` and the moved ``x`` the operator returned beside its output (gathered, or exchanged), and the
    group's name; the copy is not differentiable (it is the operator's own, for the weight gradient)."""
    ctx.save_for_backward(output[1], inputs[1])
    ctx.group_name = inputs[2]
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)
