"""The torch API's operators under autograd: each GEMM operator's backward is built from its dual operator
(overlapped too) and plain torch, so a model trains through them.

With ``AG`` the rows of every rank gathered, ``RS`` their sum scattered by rows and ``A2A`` AllToAll's slab
exchange (its own inverse):

- ``all_gather_matmul``: ``y = AG(x) @ w`` → ``dx = RS(dy @ wᵀ)`` (``matmul_reduce_scatter``),
  ``dw = AG(x)ᵀ @ dy``;
- ``matmul_reduce_scatter``: ``y = RS(x @ w)`` → ``dx = AG(dy) @ wᵀ`` (``all_gather_matmul``),
  ``dw = xᵀ @ AG(dy)``;
- ``matmul_all_reduce``: ``y = Σ_ranks x @ w`` on every rank → ``dx = dy @ wᵀ``, ``dw = xᵀ @ dy`` (a
  replicated output's gradient is the same on every rank, so the AllReduce's backward is the identity, as in
  a row-parallel linear layer);
- ``all_to_all_matmul``: ``y = A2A(x) @ w`` → ``dx = A2A(dy @ wᵀ)``, ``dw = A2A(x)ᵀ @ dy``;
- ``all_gather_matmul_silu_mul``: ``y = silu(g) · u`` with ``[g | u] = AG(x) @ w`` → the gate/up product
  recomputed (``AG(x) @ w``, not kept from the forward), ``d[g | u]`` from SiLU-mul's derivative, then
  ``dx = RS(d[g | u] @ wᵀ)`` (``matmul_reduce_scatter``), ``dw = AG(x)ᵀ @ d[g | u]``.

``AG`` and ``A2A`` of the weight gradients are plain collectives (:mod:`ovl_runtime.collectives`: NCCL under
torchrun, views in the one-GPU mode). Sequence-parallel attention and the MoE operators are forward only: their
backward raises ``UsageError``. Each backward's overlapped operator is compiled for its own shape (the
forward's with N and K swapped) the first time it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .collectives import exchange_slabs, gather_rows
from .errors import UsageError
from .groups import resolve_group


def _t(w: torch.Tensor) -> torch.Tensor:
    return w.transpose(-1, -2).contiguous()


def _save(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``x`` and ``w`` (the first two inputs) and the group's name (the third)."""
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.group_name = inputs[2]


def _all_gather_matmul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    from . import ops

    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    dy = dy.contiguous()
    dx = ops.matmul_reduce_scatter(dy, _t(w), g) if ctx.needs_input_grad[0] else None
    dw = gather_rows(x, g).transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _matmul_reduce_scatter_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    from . import ops

    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    dy = dy.contiguous()
    dx = ops.all_gather_matmul(dy, _t(w), g) if ctx.needs_input_grad[0] else None
    dw = x.transpose(-1, -2) @ gather_rows(dy, g) if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _matmul_all_reduce_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    dx = dy @ w.transpose(-1, -2) if ctx.needs_input_grad[0] else None
    dw = x.transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _all_to_all_matmul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    dx = exchange_slabs(dy @ w.transpose(-1, -2), g) if ctx.needs_input_grad[0] else None
    dw = exchange_slabs(x, g).transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _all_gather_matmul_silu_mul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    from . import ops

    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    gathered = gather_rows(x, g)
    inter = w.shape[-1] // 2
    acc = torch.promote_types(dy.dtype, torch.float32)  # SiLU-mul's derivative in fp32 at least
    gu = (gathered @ w).to(acc)
    gate, up = gu[..., :inter], gu[..., inter:]
    sig = torch.sigmoid(gate)
    silu = gate * sig
    d = dy.to(acc)
    # d silu(g)/dg = σ(g)·(1 + g·(1 − σ(g)))
    dgu = torch.cat([d * up * sig * (1 + gate * (1 - sig)), d * silu], dim=-1).to(dy.dtype)
    dx = ops.matmul_reduce_scatter(dgu, _t(w), g) if ctx.needs_input_grad[0] else None
    dw = gathered.transpose(-1, -2) @ dgu if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _forward_only(name: str) -> Callable[..., tuple[Any, ...]]:
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        raise UsageError(f"{name} has no backward (the torch API's operator is forward only): run it under torch.no_grad()")

    return backward


def _no_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    return None


#: Each operator's backward, by its ``torch.library`` name (``ovl::…``).
BACKWARDS: dict[str, tuple[Callable[..., tuple[Any, ...]], Callable[..., None]]] = {
    "ovl::all_gather_matmul": (_all_gather_matmul_backward, _save),
    "ovl::matmul_reduce_scatter": (_matmul_reduce_scatter_backward, _save),
    "ovl::matmul_all_reduce": (_matmul_all_reduce_backward, _save),
    "ovl::all_to_all_matmul": (_all_to_all_matmul_backward, _save),
    "ovl::all_gather_matmul_silu_mul": (_all_gather_matmul_silu_mul_backward, _save),
    "ovl::sequence_parallel_attention": (_forward_only("sequence_parallel_attention"), _no_context),
    "ovl::moe_all_gather_grouped_matmul": (_forward_only("moe_all_gather_grouped_matmul"), _no_context),
    "ovl::moe_grouped_matmul_reduce_scatter": (_forward_only("moe_grouped_matmul_reduce_scatter"), _no_context),
}


def register(*names: str) -> None:
    """Register the backward of each named operator (its module calls this once it has defined it)."""
    for name in names:
        backward, setup = BACKWARDS[name]
        torch.library.register_autograd(name, backward, setup_context=setup)
