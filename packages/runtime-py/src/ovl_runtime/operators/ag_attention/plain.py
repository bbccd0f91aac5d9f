"""Sequence-parallel attention without overlap: the group's all-gather of K/V, then torch's
``scaled_dot_product_attention`` over this rank's queries (the plain path of the operator for every sequence length,
:data:`ovl_runtime._runner.rows_plain.PLAIN`, below the compiler's crossover or outside the lengths it serves).

``q`` is ``[s, H·D]`` (this rank's ``s`` positions), ``kv`` ``[s, 2·Hkv·D]`` (keys then values of each kv head); on a
stacked group (one GPU, or the CPU emulation) both carry every rank's rows as a leading ``world`` dimension. Causal
masking is by global position: rank r's query i sits at ``r·s + i``. Imports torch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..._manifest.types import Manifest
from ..._torch_api.collectives import gather_rows
from ...groups import DistGroup, Group
from .spec import AttentionSpec, attention_spec


def _attend(q: torch.Tensor, kv: torch.Tensor, a: AttentionSpec, q_start: int) -> torch.Tensor:
    """One rank's ``[s, H·D]`` output from its ``q`` and the gathered ``kv`` ``[S, 2·Hkv·D]``."""
    s, S = q.shape[0], kv.shape[0]
    H, G, D = a.heads, a.kv_heads, a.head_dim
    qh = q.reshape(1, s, H, D).transpose(1, 2)
    kvh = kv.reshape(1, S, 2, G, D)
    k, v = kvh[:, :, 0].transpose(1, 2), kvh[:, :, 1].transpose(1, 2)
    mask = None
    if a.causal:
        mask = torch.arange(S, device=q.device)[None, :] <= (q_start + torch.arange(s, device=q.device))[:, None]
    out = torch.nn.functional.scaled_dot_product_attention(qh, k, v, attn_mask=mask, scale=a.scale, enable_gqa=H != G)
    return out.transpose(1, 2).reshape(s, H * D)


def plain_attention(m: Manifest) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Group], None]:
    """The plain path of ``m``'s attention (its heads, kv heads, head dimension, scale and causality):
    ``run(q, kv, out, group)`` writes every local rank's output into ``out``."""
    a = attention_spec(m)

    def run(q: torch.Tensor, kv: torch.Tensor, out: torch.Tensor, g: Group) -> None:
        gathered = gather_rows(kv, g)
        if g.stacked:
            s = q.shape[1]
            for r in range(q.shape[0]):
                out[r].copy_(_attend(q[r], gathered[r], a, r * s))
            return
        assert isinstance(g, DistGroup)  # every group but a process group is stacked
        out.copy_(_attend(q, gathered, a, g.rank * q.shape[0]))

    return run
