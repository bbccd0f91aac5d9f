"""The fused first stage's backward (``torch.ops.ovl.all_gather_matmul_silu_mul``; the Python function records
``all_gather_matmul`` and SiLU-mul instead where autograd records, keeping the gate/up product):
``y = silu(g) · u`` with ``[g | u] = AG(x) @ w`` → the gate/up product recomputed (``AG(x) @ w``), ``d[g | u]`` from
SiLU-mul's derivative, then ``dx = RS(d[g | u] @ wᵀ)`` (GEMM+ReduceScatter), ``dw = AG(x)ᵀ @ d[g | u]``.
Registered with ``torch.library`` on import."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.backward import save_operands
from ..._torch_api.collectives import gather_rows
from ...groups import resolve_group
from ..ag_gemm.autograd import ag_mm_grads
from . import op as _op  # noqa: F401 - registers the op whose backward this module registers
from .silu_mul import silu_mul_backward


def _all_gather_matmul_silu_mul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    gathered = gather_rows(x, g)
    return ag_mm_grads(ctx, silu_mul_backward(gathered @ w, dy), w, g, lambda: gathered)


torch.library.register_autograd("ovl::all_gather_matmul_silu_mul", _all_gather_matmul_silu_mul_backward, setup_context=save_operands)
