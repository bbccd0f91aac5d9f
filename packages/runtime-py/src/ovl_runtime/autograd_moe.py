"""The MoE operators' backward passes (registered by :mod:`ovl_runtime.autograd`): plain torch, each expert's rows
grouped once per backward, the collectives of :mod:`ovl_runtime.collectives`. Not overlapped.

With ``T`` tokens over all ranks, top-k slots ``i = t·k + j`` routed to expert ``e(i) = topk_ids[t, j]``, and each
rank holding its slice of every expert's columns (part 1) or depth (part 2):

- ``moe_all_gather_grouped_matmul``: ``C[i] = x_all[t] @ w[e(i)]`` → ``dx_all[t] = Σ_j dC[i] @ w[e(i)]ᵀ`` (this
  rank's slice of the columns' share), ``dx = RS(dx_all)`` (fp32) to the tokens' owners;
  ``dw[e] = Σ_{e(i) = e} x_all[t]ᵀ dC[i]``.
- ``moe_grouped_matmul_reduce_scatter``: ``y = RS(Σ_i wt[i] · h[i] @ w[e(i)])`` → with ``dY = AG(dy)``,
  ``dh[i] = wt[i] · dY[t] @ w[e(i)]ᵀ``, ``dw[e] = Σ_{e(i) = e} wt[i] · h[i]ᵀ dY[t]``, and this rank's share of
  ``dwt[i] = (h[i] @ w[e(i)]) · dY[t]`` (each rank's copy of the routing weights gets its own slice's part, as each
  rank's copy is what its partial sum read).

Grouping the slots by expert reads the experts' token counts back to the host (one sync per backward).
"""

from __future__ import annotations

from typing import Any

import torch

from .collectives import gather_rows, on_each_rank, reduce_scatter_rows
from .errors import UsageError
from .groups import resolve_group


def _by_expert(ids: torch.Tensor, experts: int, what: str) -> list[tuple[int, torch.Tensor]]:
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


def _acc(t: torch.Tensor) -> torch.dtype:
    return torch.promote_types(t.dtype, torch.float32)


def save_moe_all_gather(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``x``, ``topk_ids`` and ``w``, and the group's name."""
    ctx.save_for_backward(inputs[0], inputs[1], inputs[2])
    ctx.group_name = inputs[3]


def _ag_grads(x_all: torch.Tensor, ids: torch.Tensor, w: torch.Tensor, dc: torch.Tensor, need_w: bool) -> tuple[torch.Tensor, Any]:
    """One rank's ``dx_all`` ``[T, K]`` (fp32 at least) and ``dw`` ``[E, K, n]``."""
    tokens, k = ids.shape
    dx_slots = torch.zeros(tokens * k, x_all.shape[-1], dtype=_acc(dc), device=dc.device)
    dw = torch.zeros_like(w) if need_w else None
    for e, slots in _by_expert(ids, w.shape[0], "moe_all_gather_grouped_matmul"):
        d = dc[slots]
        dx_slots[slots] = (d @ w[e].transpose(0, 1)).to(dx_slots.dtype)
        if dw is not None:
            dw[e] = x_all[slots // k].transpose(0, 1) @ d
    return dx_slots.view(tokens, k, -1).sum(1), dw


def moe_all_gather_backward(ctx: Any, dc: torch.Tensor) -> tuple[Any, ...]:
    x, ids, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[2]
    dx_all, dw = on_each_rank(g, lambda _r, *t: _ag_grads(*t, need_w), gather_rows(x, g), ids, w, dc.contiguous())
    dx = reduce_scatter_rows(dx_all, g).to(x.dtype) if need_x else None
    return dx, None, dw, None, None


def save_moe_reduce_scatter(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    """Keep ``h``, ``topk_ids``, ``topk_weights`` and ``w``, and the group's name."""
    ctx.save_for_backward(*inputs[:4])
    ctx.group_name = inputs[4]


def _rs_grads(h: torch.Tensor, ids: torch.Tensor, wts: torch.Tensor, w: torch.Tensor, dy_all: torch.Tensor, need: tuple[bool, ...]):
    """One rank's ``dh`` ``[T·k, I]``, ``dwt`` ``[T, k]`` and ``dw`` ``[E, I, H]`` (each ``None`` unless needed)."""
    k = ids.shape[-1]
    need_h, need_wt, need_w = need
    dh = torch.zeros_like(h) if need_h else None
    dwt = torch.zeros(ids.numel(), dtype=wts.dtype, device=wts.device) if need_wt else None
    dw = torch.zeros_like(w) if need_w else None
    flat_wts = wts.reshape(-1)
    for e, slots in _by_expert(ids, w.shape[0], "moe_grouped_matmul_reduce_scatter"):
        dy = dy_all[slots // k]
        weighted = (dy.to(_acc(dy)) * flat_wts[slots].to(_acc(dy))[:, None]).to(h.dtype)
        if dh is not None:
            dh[slots] = weighted @ w[e].transpose(0, 1)
        if dw is not None:
            dw[e] = h[slots].transpose(0, 1) @ weighted
        if dwt is not None:
            dwt[slots] = ((h[slots] @ w[e]).to(_acc(dy)) * dy.to(_acc(dy))).sum(-1).to(dwt.dtype)
    return dh, (dwt.view(wts.shape) if dwt is not None else None), dw


def moe_reduce_scatter_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    h, ids, wts, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    need = (ctx.needs_input_grad[0], ctx.needs_input_grad[2], ctx.needs_input_grad[3])
    dh, dwt, dw = on_each_rank(g, lambda _r, *t: _rs_grads(*t, need), h, ids, wts, w, gather_rows(dy.contiguous(), g))
    return dh, None, dwt, dw, None
