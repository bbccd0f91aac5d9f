"""A decoder layer's parallel parts, each holding its rank's shards (``[world, ...]`` for a stacked group) and
running ovl's operators on the sequence-parallel rows (see :mod:`ovl_runtime._models.step` for the layouts):

- :class:`ParallelAttention`: q/k/v by AllGather+GEMM (column-parallel by heads: each rank gets every token of
  its heads), the attention of its heads over every token (no communication: the heads are split, the sequence
  whole), o_proj by GEMM+ReduceScatter (row-parallel, back to this rank's rows). Replicated: plain GEMMs on the
  local weights and a sum over the ranks (ovl's GEMM+AllReduce in a prefill without sequence parallelism).
- :class:`ParallelMLP`: SwiGLU by ``tp_mlp`` (AllGather + gate/up GEMM with the SiLU-mul epilogue, then
  GEMM+ReduceScatter); with biases, AllGather+GEMM, bias, SiLU-mul, GEMM+ReduceScatter.
- :class:`ParallelMoE`: the router (replicated) on this rank's rows, its top-k gathered to every rank; the experts
  (each rank its ``I/W`` slice of every one) by ``moe_all_gather_grouped_matmul`` and
  ``moe_grouped_matmul_reduce_scatter``. Replicated: the hit experts' slices in plain torch, then the sum.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..groups import Group
from ..operators.ag_gemm.api import all_gather_matmul
from ..operators.ag_moe.api import moe_all_gather_grouped_matmul
from ..operators.gemm_ar.api import matmul_all_reduce
from ..operators.gemm_rs.api import matmul_reduce_scatter
from ..operators.mlp.api import tp_mlp
from ..operators.moe_rs.api import moe_grouped_matmul_reduce_scatter
from . import comm
from .plan import AttentionPlan, MlpPlan, MoePlan
from .step import Step, attend, pad_rows, rope

KV = tuple[torch.Tensor, torch.Tensor]


def _param(t: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(t, requires_grad=t.is_floating_point())


def _bias(b: torch.Tensor | None, y: torch.Tensor) -> torch.Tensor:
    """``y`` plus a per-rank bias ``[*lead, n]`` (over its rows)."""
    return y if b is None else y + b.unsqueeze(-2)


def replicated_param(p: torch.Tensor, step: Step) -> torch.Tensor:
    """A replicated parameter as a layer uses it: on the rows layout each rank's gradient is its rows' part, summed
    over the ranks by :func:`~ovl_runtime._models.comm.replicated_in` under torchrun (a stacked group's one copy
    gets the sum by broadcasting)."""
    return comm.replicated_in(p, step.group) if step.rows else p


def row_parallel(h: torch.Tensor, w: torch.Tensor, step: Step) -> torch.Tensor:
    """``Σ_ranks h @ w``: this rank's rows by GEMM+ReduceScatter (rows layout, ``h`` every padded token) or every
    token, replicated (ovl's GEMM+AllReduce, or a plain sum)."""
    g = step.group
    if step.rows:
        return matmul_reduce_scatter(pad_rows(h, step.padded), w, g)
    if step.ovl_all_reduce:
        return comm.collapse(matmul_all_reduce(h.contiguous(), w, g), g)
    return comm.reduce_out(h @ w, g)


def column_parallel(x: torch.Tensor, w: torch.Tensor, step: Step) -> torch.Tensor:
    """``X @ w`` with X every token: AllGather+GEMM of the rows (padding dropped), or a local GEMM."""
    if step.rows:
        return all_gather_matmul(x, w, step.group)[..., : step.tokens, :]
    return comm.replicated_in(x, step.group) @ w


class ParallelAttention(nn.Module):
    def __init__(self, plan: AttentionPlan, world: int, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.heads, self.kv_heads = plan.heads // world, plan.kv_heads // world
        self.head_dim, self.scaling, self.window = plan.head_dim, plan.scaling, plan.sliding_window
        self.w_qkv, self.w_o = _param(tensors["w_qkv"]), _param(tensors["w_o"])
        self.b_qkv = _param(tensors["b_qkv"]) if "b_qkv" in tensors else None
        self.b_o = _param(tensors["b_o"]) if "b_o" in tensors else None

    def forward(self, h: torch.Tensor, step: Step, past: KV | None) -> tuple[torch.Tensor, KV]:
        qkv = _bias(self.b_qkv, column_parallel(h, self.w_qkv, step))  # [*lead, tokens, (H + 2·Hkv)·D / W]
        lead, d = qkv.shape[:-2], self.head_dim
        q, k, v = qkv.split([self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.reshape(*lead, step.batch, step.seq, self.heads, d)
        k = k.reshape(*lead, step.batch, step.seq, self.kv_heads, d)
        q, k = rope(q, k, step.cos, step.sin)
        q, k = q.transpose(-3, -2), k.transpose(-3, -2)
        v = v.reshape(*lead, step.batch, step.seq, self.kv_heads, d).transpose(-3, -2)
        if past is not None:
            k, v = torch.cat([past[0], k], dim=-2), torch.cat([past[1], v], dim=-2)
        o = attend(q, k, v, step.past, self.window, self.scaling)  # [*lead, B, H/W, S, D]
        o = o.transpose(-3, -2).reshape(*lead, step.tokens, self.heads * d)
        y = row_parallel(o, self.w_o, step)
        if self.b_o is not None:
            y = y + replicated_param(self.b_o, step)
        return y, (k, v)


class ParallelMLP(nn.Module):
    def __init__(self, plan: MlpPlan, world: int, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.inter = plan.intermediate // world
        self.w_gate_up, self.w_down = _param(tensors["w_gate_up"]), _param(tensors["w_down"])
        self.b_gate_up = _param(tensors["b_gate_up"]) if "b_gate_up" in tensors else None
        self.b_down = _param(tensors["b_down"]) if "b_down" in tensors else None

    def forward(self, h: torch.Tensor, step: Step) -> torch.Tensor:
        if step.rows and self.b_gate_up is None:
            return tp_mlp(h, self.w_gate_up, self.w_down, step.group)
        gu = _bias(self.b_gate_up, column_parallel(h, self.w_gate_up, step))
        y = row_parallel(F.silu(gu[..., : self.inter]) * gu[..., self.inter :], self.w_down, step)
        return y if self.b_down is None else y + replicated_param(self.b_down, step)


class ParallelMoE(nn.Module):
    def __init__(self, plan: MoePlan, world: int, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.topk, self.inter = plan.topk, plan.intermediate // world
        self.router = _param(tensors["router"])
        self.w_gate_up, self.w_down = _param(tensors["w_gate_up"]), _param(tensors["w_down"])

    def route(self, h: torch.Tensor, step: Step) -> tuple[torch.Tensor, torch.Tensor]:
        """Each token's experts (int32) and their weights (float32): softmax over the experts, top-k, renormalised."""
        logits = h @ replicated_param(self.router, step).t()
        probs = torch.softmax(logits.float(), dim=-1)
        weights, ids = torch.topk(probs, self.topk, dim=-1)
        return ids.to(torch.int32), weights / weights.sum(dim=-1, keepdim=True)

    def forward(self, h: torch.Tensor, step: Step) -> torch.Tensor:
        g = step.group
        ids, weights = self.route(h, step)
        if step.rows:  # this rank's rows routed; every rank's routing gathered for the operators
            ids_all = comm.gather_rows(ids, g)
            weights_all = comm.gather_rows(weights, g)
            c = moe_all_gather_grouped_matmul(h, ids_all, self.w_gate_up, g)  # [*lead, padded·k, 2·I/W]
            act = (F.silu(c[..., : self.inter]) * c[..., self.inter :]).contiguous()
            return moe_grouped_matmul_reduce_scatter(act, ids_all, weights_all, self.w_down, g)
        return comm.reduce_out(self._experts(comm.replicated_in(h, g), ids, comm.replicated_in(weights, g), g), g)

    def _experts(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, g: Group) -> torch.Tensor:
        """This rank's partial sum ``Σ_j w[t, j] · expert_j(x[t])`` over its slice of the experts (plain torch)."""
        lead = self.w_down.shape[:-3]
        out = x.new_zeros((*lead, x.shape[-2], x.shape[-1]))
        for e in torch.unique(ids).tolist():
            tok, slot = (ids == e).nonzero(as_tuple=True)
            gu = x[..., tok, :] @ self.w_gate_up[..., e, :, :]
            act = F.silu(gu[..., : self.inter]) * gu[..., self.inter :]
            y = (act @ self.w_down[..., e, :, :]) * weights[tok, slot].unsqueeze(-1)
            out = out.index_add(-2, tok, y.to(out.dtype))
        return out
