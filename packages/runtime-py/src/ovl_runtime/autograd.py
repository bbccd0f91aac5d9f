"""The torch API's operators under autograd: each GEMM operator's backward is built from its dual operator
(overlapped too) and plain torch, attention's and MoE's from plain torch and collectives, so a model trains
through every operator.

With ``AG`` the rows of every rank gathered, ``RS`` their sum scattered by rows and ``A2A`` AllToAll's slab
exchange (its own inverse):

- ``all_gather_matmul``: ``y = AG(x) @ w`` → ``dx = RS(dy @ wᵀ)`` (``matmul_reduce_scatter``),
  ``dw = AG(x)ᵀ @ dy``; where ``w`` needs a gradient the Python function records
  ``all_gather_matmul_gathered``, whose second output is ``AG(x)`` copied from the kernel's own buffer, kept for
  ``dw`` instead of gathered again;
- ``matmul_reduce_scatter``: ``y = RS(x @ w)`` → ``dx = AG(dy) @ wᵀ`` (``all_gather_matmul_gathered``: ``AG(dy)``
  too, for ``dw = xᵀ @ AG(dy)``);
- ``matmul_all_reduce``: ``y = Σ_ranks x @ w`` on every rank → ``dx = dy @ wᵀ``, ``dw = xᵀ @ dy`` (a
  replicated output's gradient is the same on every rank, so the AllReduce's backward is the identity, as in
  a row-parallel linear layer);
- ``all_to_all_matmul``: ``y = A2A(x) @ w`` → ``dx = A2A(dy @ wᵀ)``, ``dw = A2A(x)ᵀ @ dy``; where ``w`` needs a
  gradient the Python function records ``all_to_all_matmul_exchanged``, whose second output is ``A2A(x)`` copied
  from the kernel's own buffer, kept for ``dw`` instead of exchanged again;
- ``all_gather_matmul_silu_mul`` (the fused kernel's op, ``torch.ops.ovl.all_gather_matmul_silu_mul``; the
  Python function records ``all_gather_matmul`` and SiLU-mul instead where autograd records, keeping the gate/up
  product): ``y = silu(g) · u`` with ``[g | u] = AG(x) @ w`` → the gate/up product recomputed (``AG(x) @ w``),
  ``d[g | u]`` from SiLU-mul's derivative, then ``dx = RS(d[g | u] @ wᵀ)`` (``matmul_reduce_scatter``),
  ``dw = AG(x)ᵀ @ d[g | u]``;
- ``sequence_parallel_attention``: ``o = attention(q, AG(kv))`` → the keys and values gathered again, each rank's
  ``dq`` and its share of every position's ``dkv`` from SDPA's backward (recomputing the attention; causal as a
  lower-right mask over the keys up to the rank's last position, GQA by repeating the kv heads), then
  ``dkv = RS(dkv)`` (fp32) to the positions' owners. Plain torch and collectives, not overlapped;
- the MoE operators: :mod:`ovl_runtime.autograd_moe` (plain torch over each expert's rows, not overlapped).

The other ``AG``, ``RS`` and ``A2A`` (AllToAll+GEMM's ``dx``), attention's and MoE's are plain collectives
(:mod:`ovl_runtime.collectives`: NCCL under torchrun, views and sums in the one-GPU mode). Each backward's
overlapped operator is compiled for its own shape (the forward's with N and K swapped) the first time it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention.bias import causal_lower_right

from .autograd_moe import moe_all_gather_backward, moe_reduce_scatter_backward, save_moe_all_gather, save_moe_reduce_scatter
from .collectives import exchange_slabs, gather_rows, on_each_rank, reduce_scatter_rows
from .groups import Group, resolve_group
from .silu_mul import silu_mul_backward
from .transpose import transposed


def _t(w: torch.Tensor) -> torch.Tensor:
    """``wᵀ`` for the dual operator, moved in tiles (:mod:`ovl_runtime.transpose`)."""
    return transposed(w)


def _save(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``x`` and ``w`` (the first two inputs) and the group's name (the third)."""
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.group_name = inputs[2]


def _ag_mm_grads(ctx: Any, dy: torch.Tensor, w: torch.Tensor, g: Group, gathered: Callable[[], torch.Tensor]) -> tuple[Any, ...]:
    """AllGather+GEMM's gradients where needed: ``dx = RS(dy @ wᵀ)`` by GEMM+ReduceScatter, ``dw = AG(x)ᵀ @ dy``
    with ``AG(x)`` from ``gathered`` (called only for ``dw``)."""
    from . import ops

    dx = ops.matmul_reduce_scatter(dy, _t(w), g) if ctx.needs_input_grad[0] else None
    dw = gathered().transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


def _all_gather_matmul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    return _ag_mm_grads(ctx, dy.contiguous(), w, g, lambda: gather_rows(x, g))


def _save_gathered(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``w`` and the moved ``x`` the operator returned beside its output (gathered, or exchanged), and the
    group's name; the copy is not differentiable (it is the operator's own, for the weight gradient)."""
    ctx.save_for_backward(output[1], inputs[1])
    ctx.group_name = inputs[2]
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)


def _all_gather_matmul_gathered_backward(ctx: Any, dy: torch.Tensor | None, _dgathered: Any) -> tuple[Any, ...]:
    gathered, w = ctx.saved_tensors
    if dy is None:
        return None, None, None
    return _ag_mm_grads(ctx, dy.contiguous(), w, resolve_group(ctx.group_name), lambda: gathered)


def _matmul_reduce_scatter_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    dy = dy.contiguous()
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dx = gathered = None
    if need_x and need_w:  # AG(dy) @ wᵀ, and AG(dy) itself from the operator's buffer for the weight gradient
        dx, gathered = torch.ops.ovl.all_gather_matmul_gathered(dy, _t(w), g.name)
    elif need_x:
        dx = torch.ops.ovl.all_gather_matmul(dy, _t(w), g.name)
    dw = x.transpose(-1, -2) @ (gather_rows(dy, g) if gathered is None else gathered) if need_w else None
    return dx, dw, None


def _matmul_all_reduce_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    dx = dy @ w.transpose(-1, -2) if ctx.needs_input_grad[0] else None
    dw = x.transpose(-1, -2) @ dy if ctx.needs_input_grad[1] else None
    return dx, dw, None


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


def _all_gather_matmul_silu_mul_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    gathered = gather_rows(x, g)
    return _ag_mm_grads(ctx, silu_mul_backward(gathered @ w, dy), w, g, lambda: gathered)


def _save_attention(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``q`` and ``kv``, the group's name and ``causal``."""
    ctx.save_for_backward(inputs[0], inputs[1])
    ctx.group_name, ctx.causal = inputs[2], inputs[3]


def _attention_grads(q: torch.Tensor, kv: torch.Tensor, dout: torch.Tensor, rank: int, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One rank's ``dq`` ``[s, H, D]`` and its contribution to every position's ``dkv`` ``[S, 2, Hkv, D]``, from
    its queries ``q`` (global positions ``rank·s`` onward), the gathered ``kv`` and its output's gradient."""
    s, heads, d = q.shape
    total, _, kv_heads, _ = kv.shape
    seen = (rank + 1) * s if causal else total  # causal: no later position's key reaches these queries
    with torch.enable_grad():
        qh = q.detach().transpose(0, 1).unsqueeze(0).requires_grad_(True)  # [1, H, s, D]
        kvs = kv[:seen].detach().requires_grad_(True)
        k, v = (kvs[:, i].permute(1, 0, 2).repeat_interleave(heads // kv_heads, dim=0).unsqueeze(0) for i in (0, 1))
        # Lower-right causal: query i of this rank sits at position rank·s + i of the `seen` keys.
        mask = causal_lower_right(s, seen) if causal else None
        out = torch.nn.functional.scaled_dot_product_attention(qh, k, v, attn_mask=mask)
        dq, dkv_seen = torch.autograd.grad(out, (qh, kvs), dout.transpose(0, 1).unsqueeze(0).to(out.dtype))
    dkv = dkv_seen.new_zeros(kv.shape)
    dkv[:seen] = dkv_seen
    return dq.squeeze(0).transpose(0, 1), dkv


def _sequence_parallel_attention_backward(ctx: Any, dout: torch.Tensor) -> tuple[Any, ...]:
    q, kv = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    dq, dkv_all = on_each_rank(g, lambda r, qr, kvr, dr: _attention_grads(qr, kvr, dr, r, ctx.causal), q, gather_rows(kv, g), dout)
    # Every rank's queries read every owner's keys: each owner's rows of dkv are the sum over the ranks.
    acc = torch.promote_types(kv.dtype, torch.float32)
    dkv = reduce_scatter_rows(dkv_all.to(acc), g).to(kv.dtype) if ctx.needs_input_grad[1] else None
    return (dq.to(q.dtype) if ctx.needs_input_grad[0] else None), dkv, None, None


#: Each operator's backward, by its ``torch.library`` name (``ovl::…``).
BACKWARDS: dict[str, tuple[Callable[..., tuple[Any, ...]], Callable[..., None]]] = {
    "ovl::all_gather_matmul": (_all_gather_matmul_backward, _save),
    "ovl::all_gather_matmul_gathered": (_all_gather_matmul_gathered_backward, _save_gathered),
    "ovl::matmul_reduce_scatter": (_matmul_reduce_scatter_backward, _save),
    "ovl::matmul_all_reduce": (_matmul_all_reduce_backward, _save),
    "ovl::all_to_all_matmul": (_all_to_all_matmul_backward, _save),
    "ovl::all_to_all_matmul_exchanged": (_all_to_all_matmul_exchanged_backward, _save_gathered),
    "ovl::all_gather_matmul_silu_mul": (_all_gather_matmul_silu_mul_backward, _save),
    "ovl::sequence_parallel_attention": (_sequence_parallel_attention_backward, _save_attention),
    "ovl::moe_all_gather_grouped_matmul": (moe_all_gather_backward, save_moe_all_gather),
    "ovl::moe_grouped_matmul_reduce_scatter": (moe_reduce_scatter_backward, save_moe_reduce_scatter),
}


def register(*names: str) -> None:
    """Register the backward of each named operator (its module calls this once it has defined it)."""
    for name in names:
        backward, setup = BACKWARDS[name]
        torch.library.register_autograd(name, backward, setup_context=setup)
