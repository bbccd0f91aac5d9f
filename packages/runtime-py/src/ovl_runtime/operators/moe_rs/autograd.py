"""MoE part 2's backward (plain torch over each expert's rows; not overlapped). With ``T`` tokens, top-k slots
``i = t·k + j`` routed to ``e(i) = topk_ids[t, j]`` and each rank holding its slice of every expert's depth:
``y = RS(Σ_i wt[i] · h[i] @ w[e(i)])`` → with ``dY = AG(dy)``, ``dh[i] = wt[i] · dY[t] @ w[e(i)]ᵀ``,
``dw[e] = Σ_{e(i) = e} wt[i] · h[i]ᵀ dY[t]``, and this rank's share of ``dwt[i] = (h[i] @ w[e(i)]) · dY[t]`` (each
rank's copy of the routing weights gets its own slice's part, as each rank's copy is what its partial sum read).
Registered with ``torch.library`` on import."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.collectives import gather_rows, on_each_rank
from ...groups import resolve_group
from ..ag_moe.autograd import acc_dtype, by_expert
from . import op as _op  # noqa: F401 - registers the op whose backward this module registers


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
    for e, slots in by_expert(ids, w.shape[0], "moe_grouped_matmul_reduce_scatter"):
        dy = dy_all[slots // k]
        weighted = (dy.to(acc_dtype(dy)) * flat_wts[slots].to(acc_dtype(dy))[:, None]).to(h.dtype)
        if dh is not None:
            dh[slots] = weighted @ w[e].transpose(0, 1)
        if dw is not None:
            dw[e] = h[slots].transpose(0, 1) @ weighted
        if dwt is not None:
            dwt[slots] = ((h[slots] @ w[e]).to(acc_dtype(dy)) * dy.to(acc_dtype(dy))).sum(-1).to(dwt.dtype)
    return dh, (dwt.view(wts.shape) if dwt is not None else None), dw


def moe_reduce_scatter_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    h, ids, wts, w = ctx.saved_tensors
    g = resolve_group(ctx.group_name)
    need = (ctx.needs_input_grad[0], ctx.needs_input_grad[2], ctx.needs_input_grad[3])
    dh, dwt, dw = on_each_rank(
        g, lambda _r, h, ids, wts, w, dy_all: _rs_grads(h, ids, wts, w, dy_all, need), h, ids, wts, w, gather_rows(dy.contiguous(), g)
    )
    return dh, None, dwt, dw, None


torch.library.register_autograd(
    "ovl::moe_grouped_matmul_reduce_scatter", moe_reduce_scatter_backward, setup_context=save_moe_reduce_scatter
)
