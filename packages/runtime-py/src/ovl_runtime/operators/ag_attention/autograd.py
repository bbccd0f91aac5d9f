"""Sequence-parallel attention's backward: ``o = attention(q, AG(kv))`` → the keys and values gathered again, each
rank's ``dq`` and its share of every position's ``dkv`` from SDPA's backward (recomputing the attention; causal as a
lower-right mask over the keys up to the rank's last position, GQA by repeating the kv heads), then
``dkv = RS(dkv)`` (fp32) to the positions' owners. Plain torch and collectives, not overlapped. Registered with
``torch.library`` on import."""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention.bias import causal_lower_right

from ..._torch_api.collectives import gather_rows, on_each_rank, reduce_scatter_rows
from ...groups import resolve_group
from . import op as _op  # noqa: F401 - registers the op whose backward this module registers


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


torch.library.register_autograd("ovl::sequence_parallel_attention", _sequence_parallel_attention_backward, setup_context=_save_attention)
