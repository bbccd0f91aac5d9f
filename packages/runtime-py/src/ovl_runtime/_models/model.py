"""The tensor-parallel decoder :func:`ovl_runtime.models.parallelize` returns.

Prefill (and training) runs the residual stream sequence-parallel: the ``batch·seq`` tokens, padded with zero rows
to a multiple of the world, are cut into ``world`` equal runs of rows, rank r holding run r; norms run on the local
rows, each attention and MLP block gathers them behind its first GEMM and scatters its result behind its last
(:mod:`ovl_runtime._models.layers`). The embedding and the output projection are vocabulary-parallel (each rank
``V/W`` rows): the embedding's partial rows are reduce-scattered to their owners, the logits' vocabulary slices
gathered side by side, so every rank ends with the full ``[batch, seq, vocab]`` logits (one tensor for a stacked
group). Decode steps run replicated (a few tokens, on every rank): local GEMMs on the same shards, plain sums over
the ranks for the row-parallel halves, no autograd.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import UsageError
from ..groups import DistGroup, Group
from . import comm
from .layers import KV, ParallelAttention, ParallelMLP, ParallelMoE, column_parallel, replicated_param
from .plan import MlpPlan, ModelPlan
from .shard import Get, ShardSpec, cut
from .step import Step, rms_norm, row_multiple


@dataclass
class KVCache:
    """Every layer's keys and values of this process's heads, ``[*lead, batch, kv_heads / world, length, D]``."""

    layers: list[KV] = field(default_factory=list)
    length: int = 0
    batch: int = 0


class ParallelLayer(nn.Module):
    def __init__(self, plan: ModelPlan, i: int, world: int, tensors: dict[str, torch.Tensor]) -> None:
        super().__init__()
        lp = plan.layers[i]

        def sub(prefix: str) -> dict[str, torch.Tensor]:
            return {k[len(prefix) + 1 :]: v for k, v in tensors.items() if k.startswith(prefix + ".")}

        self.input_norm = nn.Parameter(tensors["input_norm"])
        self.post_norm = nn.Parameter(tensors["post_norm"])
        self.eps_in, self.eps_post = lp.input_eps, lp.post_eps
        self.attn = ParallelAttention(lp.attn, world, sub("attn"))
        self.mlp: nn.Module = (
            ParallelMLP(lp.mlp, world, sub("mlp")) if isinstance(lp.mlp, MlpPlan) else ParallelMoE(lp.mlp, world, sub("mlp"))
        )

    def forward(self, x: torch.Tensor, step: Step, past: KV | None) -> tuple[torch.Tensor, KV]:
        a, kv = self.attn(rms_norm(x, replicated_param(self.input_norm, step), self.eps_in), step, past)
        x = x + a
        x = x + self.mlp(rms_norm(x, replicated_param(self.post_norm, step), self.eps_post), step)
        return x, kv


class ParallelCausalLM(nn.Module):
    """A Hugging Face decoder split over ``group`` (see :func:`ovl_runtime.models.parallelize`)."""

    def __init__(
        self,
        plan: ModelPlan,
        group: Group,
        specs: list[ShardSpec],
        tensors: dict[str, torch.Tensor],
        rotary: nn.Module,
        sequence_parallel: bool,
    ) -> None:
        super().__init__()
        self._specs = specs
        self.group, self.arch, self.sequence_parallel = group, plan.arch, sequence_parallel
        self.vocab, self.hidden, self.tied = plan.vocab, plan.hidden, plan.tied
        self.embed = nn.Parameter(tensors["embed"])
        self.layers = nn.ModuleList(
            ParallelLayer(plan, i, group.world, {k[len(f"layers.{i}.") :]: v for k, v in tensors.items() if k.startswith(f"layers.{i}.")})
            for i in range(len(plan.layers))
        )
        self.norm = nn.Parameter(tensors["norm"])
        self.eps = plan.norm_eps
        self.lm_head = None if plan.tied else nn.Parameter(tensors["lm_head"])
        self.rotary = rotary
        self.multiple = row_multiple(plan, group.world)

    @property
    def rank(self) -> int:
        return self.group.rank if isinstance(self.group, DistGroup) else 0

    def shard_dense(self, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This process's shards, by this model's parameter names, of tensors named like the dense model's parameters
        (its gradients, to compare with this model's): cut exactly as the parameters were."""
        get: Get = lambda name: tensors[name]  # noqa: E731
        return {s.name: cut(s, get, self.group.world, self.group.stacked, self.rank) for s in self._specs}

    # ---- the pieces ----
    def _ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() not in (1, 2) or input_ids.dtype not in (torch.int32, torch.int64):
            raise UsageError(
                f"{self.arch}: input_ids must be an integer tensor [batch, seq] or [seq], got {getattr(input_ids, 'shape', input_ids)}"
            )
        return input_ids.to(self.embed.device).reshape(input_ids.shape[0] if input_ids.dim() == 2 else 1, -1)

    def _embed(self, ids: torch.Tensor, step: Step) -> torch.Tensor:
        """The tokens' embeddings: this rank's rows (rows layout) or every token (replicated)."""
        vl = self.embed.shape[-2]
        flat = ids.reshape(-1)
        if step.rows:
            flat = torch.nn.functional.pad(flat, (0, step.padded - step.tokens), value=-1)  # padding rows embed to zero
        if self.group.stacked:  # every rank's ids into its own vocabulary rows: [world, tokens]
            local = flat - (torch.arange(self.group.world, device=flat.device) * vl).unsqueeze(-1)
        else:
            local = flat - self.rank * vl
        mine = (local >= 0) & (local < vl)
        idx = torch.where(mine, local, torch.zeros_like(local))
        rows = torch.gather(self.embed, -2, idx.unsqueeze(-1).expand(*idx.shape, self.embed.shape[-1]))
        partial = rows * mine.unsqueeze(-1).to(rows.dtype)  # [*lead, tokens, H]: this rank's vocabulary rows
        return comm.reduce_scatter_rows(partial, self.group) if step.rows else comm.reduce_out(partial, self.group)

    def _head_weight(self) -> torch.Tensor:
        return self.embed.transpose(-1, -2).contiguous() if self.lm_head is None else self.lm_head

    def _logits(self, x: torch.Tensor, step: Step) -> torch.Tensor:
        h = rms_norm(x, replicated_param(self.norm, step), self.eps)
        local = column_parallel(h, self._head_weight(), step)  # [*lead, tokens, V/W]
        return comm.gather_columns(local, self.group).reshape(step.batch, step.seq, self.vocab)

    def _run(self, ids: torch.Tensor, cache: KVCache | None, prefill: bool) -> tuple[torch.Tensor, KVCache]:
        past = cache.length if cache is not None else 0
        batch, seq = ids.shape
        cos, sin = self.rotary(self.embed, torch.arange(past, past + seq, device=ids.device).unsqueeze(0))
        # Prefill: sequence-parallel rows, or replicated with ovl's GEMM+AllReduce; decode: replicated, plain sums.
        rows = prefill and self.sequence_parallel
        step = Step(self.group, rows, batch, seq, past, cos, sin, multiple=self.multiple, ovl_all_reduce=prefill and not rows)
        x = self._embed(ids, step)
        new = KVCache(length=past + step.seq, batch=step.batch)
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, step, cache.layers[i] if cache is not None else None)
            new.layers.append(kv)
        return self._logits(x, step), new

    # ---- the public calls ----
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The logits ``[batch, seq, vocab]`` (``[1, seq, vocab]`` for a 1-D ``input_ids``) of a prefill, the same on
        every rank (under torchrun every rank passes the same ids); differentiable."""
        return self._run(self._ids(input_ids), None, prefill=True)[0]

    def prefill(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, KVCache]:
        """The prefill's logits and the KV cache the decode steps continue from."""
        return self._run(self._ids(input_ids), None, prefill=True)

    @torch.no_grad()
    def decode(self, input_ids: torch.Tensor, cache: KVCache) -> tuple[torch.Tensor, KVCache]:
        """One decode step: the next tokens ``[batch]`` or ``[batch, n]`` after ``cache``; returns their logits
        ``[batch, n, vocab]`` and the longer cache. Replicated layout, plain GEMMs and sums (see the module docstring)."""
        ids = input_ids.reshape(input_ids.shape[0], -1) if input_ids.dim() >= 1 else input_ids.reshape(1, 1)
        if ids.shape[0] != cache.batch:
            raise UsageError(f"{self.arch}: decode takes the cache's batch of {cache.batch} sequences, got {ids.shape[0]}")
        return self._run(self._ids(ids), cache, prefill=False)

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, steps: int) -> torch.Tensor:
        """Greedy decoding: ``steps`` tokens after ``input_ids`` ``[batch, seq]``, ``[batch, steps]``."""
        logits, cache = self.prefill(input_ids)
        out = []
        nxt = logits[:, -1].argmax(-1)
        for _ in range(steps):
            out.append(nxt)
            logits, cache = self.decode(nxt, cache)
            nxt = logits[:, -1].argmax(-1)
        return torch.stack(out, dim=1)
