"""MoE part 1's backward (plain torch over each expert's rows, the collectives of
:mod:`ovl_runtime._torch_api.collectives`; not overlapped). With ``T`` tokens over all ranks, top-k slots
``i = t·k + j`` routed to expert ``e(i) = topk_ids[t, j]`` and each rank holding its slice of every expert's columns:
``C[i] = x_all[t] @ w[e(i)]`` → ``dx_all[t] = Σ_j dC[i] @ w[e(i)]ᵀ`` (this rank's slice of the columns' share),
``dx = RS(dx_all)`` (fp32) to the tokens' owners; ``dw[e] = Σ_{e(i) = e} x_all[t]ᵀ dC[i]``.

Grouping the slots by expert reads the experts' token counts back to the host (one sync per backward).
Registered with ``torch.library`` on import."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.collectives import gather_rows, on_each_rank, reduce_scatter_rows
from ...errors import UsageError
from ...groups import resolve_group
from . import op as _op  # noqa: F401 - registers the op whose backward this module registers


def by_expert(ids: torch.Tensor, experts: int, what: str) -> list[tuple[int, torch.Tensor]]:
    """``(e, the slots t·k + j routed to e)`` for every expert with any slot (one host sync for the counts)."""
    flat = ids.reshape(-1).long()
    # Bin 0 counts ids below 0, bin experts + 1 those above the last expert: one read-back checks and counts.
    binned = torch.bincount(flat.clamp(-1, experts) + 1, minlength=experts + 2).tolist()
    if binned[0] or binned[-1]:
        raise UsageError(f"{what}: topk_ids name experts outside [0, {experts})")
    counts = binned[1:-1]
    order = torch.argsort(flat, stable=True)
    groups, start = [], 0
    for e, c in enumerate(counts):
        if c:
            groups.append((e, order[start : start + c]))
        start += c
    return groups


def acc_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)


def save_moe_all_gather(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``x``, ``topk_ids`` and ``w``, and the group's name."""
    ctx.save_for_backward(inputs[0], inputs[1], inputs[2])
    ctx.group_name = inputs[3]


def _ag_grads(x_all: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, dc: torch.Tensor, need_w: bool) -> tuple[torch.Tensor, Any]:
    """One rank's ``dx_all`` ``[T, K]`` (fp32 at least) and ``dw`` ``[E, K, n]``."""
    tokens, k = ids.shape
    dx_slots = torch.zeros(tokens * k, x_all.shape[-1], dtype=acc_dtype(dc), device=dc.device)
    dw = torch.zeros_like(w) if need_w else None
    for e, slots in by_expert(ids, w.shape[0], "moe_all_gather_grouped_matmul"):
        d = dc[slots]
        dx_slots[slots] = (d @ w[e].transpose(0, 1)).to(dx_slots.dtype)
        if dw is not None:
            dw[e] = x_all[slots // k].transpose(0, 1) @ d
    return dx_slots.view(tokens, k, -1).sum(1), dw


def moe_all_gather_backward(ctx: Any, dc: torch.Tensor) -> tuple[Any, ...]:
    x, ids, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
    dx_all, dw = on_each_rank(
        g, lambda _r, x_all, ids, w, dc: _ag_grads(x_all, ids, w, dc, need_w), gather_rows(x, g), ids, w, dc.contiguous()
    )
    dx = reduce_scatter_rows(dx_all, g).to(x.dtype) if need_x else None
    return dx, None, dw, None, None


torch.library.register_autograd("ovl::moe_all_gather_grouped_matmul", moe_all_gather_backward, setup_context=save_moe_all_gather)
