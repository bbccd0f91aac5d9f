"""One forward pass's shape of the work, shared by every layer: where the activations live, which tokens, which
positions, and the plain pieces of a decoder layer (RMSNorm, rotary embedding, attention over local heads).

Two layouts of the residual stream ``x``:

- **rows** (sequence-parallel; prefill and training with ``sequence_parallel=True``): each rank holds its
  ``padded / world`` rows of the flattened ``[batch·seq]`` tokens, ``[*lead, rows, hidden]`` (``lead`` is
  ``(world,)`` for a stacked group, ``()`` under torchrun); the token count is padded with zero rows to a
  multiple of the world and the padding dropped where the tokens meet (attention) and at the end.
- **replicated** (decode steps; prefill with ``sequence_parallel=False``): every rank holds every token,
  ``[tokens, hidden]`` (one tensor without the rank dimension for a stacked group: it broadcasts against the
  stacked weights).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..groups import Group
from .plan import ModelPlan, MoePlan


@dataclass
class Step:
    group: Group
    rows: bool
    batch: int
    seq: int
    past: int
    cos: torch.Tensor
    sin: torch.Tensor
    #: Rows layout: the tokens are padded to a multiple of this (:func:`row_multiple`).
    multiple: int = 1
    #: Replicated layout: reduce row-parallel results with ovl's GEMM+AllReduce (prefill) instead of a plain sum.
    ovl_all_reduce: bool = False

    @property
    def tokens(self) -> int:
        return self.batch * self.seq

    @property
    def padded(self) -> int:
        return -(-self.tokens // self.multiple) * self.multiple


def row_multiple(plan: ModelPlan, world: int) -> int:
    """What the rows layout pads the token count to a multiple of: the world (equal runs of rows), and with routed
    experts so that every rank's int32 ``[tokens, k]`` routing in a stacked tensor starts 16-byte aligned."""
    topks = [layer.mlp.topk for layer in plan.layers if isinstance(layer.mlp, MoePlan)]
    return world * max((4 // math.gcd(4, k) for k in topks), default=1)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """transformers' RMSNorm: normalised in float32, scaled in the input's dtype."""
    dtype = x.dtype
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary embedding of ``q``, ``k`` ``[*lead, batch, seq, heads, D]`` with ``cos``, ``sin`` ``[1, seq, D]``."""
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int, window: int | None, scale: float) -> torch.Tensor:
    """Causal attention of ``q`` ``[*lead, B, H, S, D]`` (positions ``past ..``) over ``k``, ``v``
    ``[*lead, B, Hkv, past + S, D]`` (positions ``0 ..``), query head h reading kv head ``h // (H / Hkv)``;
    ``window``: a key more than ``window - 1`` positions behind the query is masked (sliding-window attention)."""
    lead, (heads, s, d) = q.shape[:-3], q.shape[-3:]
    kv_heads, total = k.shape[-3], k.shape[-2]
    rep = heads // kv_heads
    qf = q.reshape(-1, heads, s, d)
    kf = k.reshape(-1, kv_heads, total, d).repeat_interleave(rep, dim=1)
    vf = v.reshape(-1, kv_heads, total, d).repeat_interleave(rep, dim=1)
    if past == 0 and s == total and window is None:
        out = F.scaled_dot_product_attention(qf, kf, vf, is_causal=True, scale=scale)
    else:
        qpos = torch.arange(past, past + s, device=q.device)[:, None]
        kpos = torch.arange(total, device=q.device)[None, :]
        allowed = kpos <= qpos
        if window is not None:
            allowed = allowed & (qpos - kpos < window)
        out = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=allowed, scale=scale)
    return out.reshape(*lead, heads, s, d)


def pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` ``[..., n, c]`` with zero rows appended up to ``rows``."""
    extra = rows - x.shape[-2]
    return x if extra == 0 else F.pad(x, (0, 0, 0, extra))
