"""Tensor-parallel layers built on ovl's overlapped operators (``ovl_runtime.ops``).

:class:`TensorParallelMLP` is a LLaMA-style MLP (``down(silu(gate(x)) * up(x))``) split
over a group Megatron-style, with sequence-parallel activations in and out: the
column-parallel gate/up projection is one AllGather+GEMM (the gather of the token rows
hidden behind the GEMM), the row-parallel down projection one GEMM+ReduceScatter (the
scatter hidden behind it). Each rank holds ``intermediate / world`` columns of the gate and
up weights (fused into one ``[hidden, 2 · intermediate / world]`` matrix) and the matching
rows of the down weight.

Weights are stored ``[in, out]`` (the layout the GEMMs read), not ``nn.Linear``'s
``[out, in]``; :meth:`TensorParallelMLP.from_dense` shards full weights given as
``nn.Linear`` stores them. With a :class:`~ovl_runtime.groups.OneGpuGroup` every tensor
carries the rank first (weights ``[world, in, out]``, activations ``[world, rows, hidden]``).

:class:`SequenceParallelAttention` is self-attention with the sequence sharded over the group
(context parallelism): every rank holds all heads' weights and ``S / world`` positions; its
queries attend every rank's keys and values, gathered behind the attention by one
``ops.sequence_parallel_attention`` (MHA or GQA, causal or not). Its weights are the same
on every rank (one copy, broadcast over the one-GPU mode's rank dimension). In training, each
rank's copy gets the gradient of its own positions' loss: sum them over the group before the
optimizer step (an AllReduce, as data parallelism does; the one-GPU mode's one copy gets the sum).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import ops
from .errors import UsageError
from .groups import Group, resolve_group

__all__ = ["SequenceParallelAttention", "TensorParallelMLP"]


def _split(n: int, world: int, what: str) -> int:
    if n % world:
        raise UsageError(f"{what} = {n} does not split over {world} ranks")
    return n // world


class TensorParallelMLP(nn.Module):
    """``y = down(silu(gate(x)) * up(x))`` with the token rows sharded over ``group`` in and out."""

    def __init__(self, hidden: int, intermediate: int, group: Any, *, dtype: torch.dtype = torch.bfloat16, device: Any = "cuda") -> None:
        super().__init__()
        self.group: Group = resolve_group(group)
        self.hidden, self.intermediate = hidden, intermediate
        self.local = _split(intermediate, self.group.world, "intermediate")
        lead = (self.group.world,) if self.group.stacked else ()
        self.gate_up = nn.Parameter(torch.empty(*lead, hidden, 2 * self.local, dtype=dtype, device=device))
        self.down = nn.Parameter(torch.empty(*lead, self.local, hidden, dtype=dtype, device=device))

    @classmethod
    def from_dense(cls, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor, group: Any) -> TensorParallelMLP:
        """This process's shards of full weights stored as ``nn.Linear`` stores them:
        ``gate``, ``up`` ``[intermediate, hidden]``, ``down`` ``[hidden, intermediate]``."""
        intermediate, hidden = gate.shape
        if tuple(up.shape) != (intermediate, hidden) or tuple(down.shape) != (hidden, intermediate):
            raise UsageError(
                f"gate {tuple(gate.shape)}, up {tuple(up.shape)} and down {tuple(down.shape)} are not "
                "[intermediate, hidden], [intermediate, hidden], [hidden, intermediate]"
            )
        mlp = cls(hidden, intermediate, group, dtype=gate.dtype, device=gate.device)
        g, n = mlp.group, mlp.local
        ranks = range(g.world) if g.stacked else range(g.rank, g.rank + 1)  # type: ignore[union-attr]
        with torch.no_grad():
            for i, r in enumerate(ranks):
                cols = slice(r * n, (r + 1) * n)
                gu = torch.cat([gate[cols].t(), up[cols].t()], dim=1)
                dn = down[:, cols].t()
                (mlp.gate_up[i] if g.stacked else mlp.gate_up).copy_(gu)
                (mlp.down[i] if g.stacked else mlp.down).copy_(dn)
        return mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: this rank's token rows ``[rows, hidden]`` (``[world, rows, hidden]`` on one GPU);
        returns the same rows of the MLP's output."""
        # Two launches: AG + gate/up GEMM + SiLU-mul, then GEMM + RS.
        return ops.tp_mlp(x, self.gate_up, self.down, self.group)


class SequenceParallelAttention(nn.Module):
    """``o_proj(attention(q_proj(x), k_proj(x), v_proj(x)))`` with the positions of ``x`` sharded
    over ``group`` (rank r holds positions ``r · S / world`` onward), in and out.

    ``wq`` ``[hidden, H·D]``, ``wkv`` ``[hidden, 2·Hkv·D]`` (every kv head's keys, then its
    values) and ``wo`` ``[H·D, hidden]`` are stored ``[in, out]``; scale ``1/√D``. Positional
    encodings (rotary) are the caller's: apply them to ``q`` / ``kv`` in a subclass's
    :meth:`project`."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        group: Any,
        *,
        causal: bool = False,
        dtype: torch.dtype = torch.bfloat16,
        device: Any = "cuda",
    ) -> None:
        super().__init__()
        if min(hidden, heads, kv_heads, head_dim) < 1 or heads % kv_heads:
            raise UsageError(f"heads ({heads}) must be a positive multiple of kv_heads ({kv_heads}); hidden and head_dim positive")
        self.group: Group = resolve_group(group)
        self.hidden, self.heads, self.kv_heads, self.head_dim, self.causal = hidden, heads, kv_heads, head_dim, causal
        self.wq = nn.Parameter(torch.empty(hidden, heads * head_dim, dtype=dtype, device=device))
        self.wkv = nn.Parameter(torch.empty(hidden, 2 * kv_heads * head_dim, dtype=dtype, device=device))
        self.wo = nn.Parameter(torch.empty(heads * head_dim, hidden, dtype=dtype, device=device))

    @classmethod
    def from_dense(
        cls, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, heads: int, group: Any, *, causal: bool = False
    ) -> SequenceParallelAttention:
        """The layer of dense projections stored as ``nn.Linear`` stores them: ``q`` ``[H·D, hidden]``,
        ``k`` and ``v`` ``[Hkv·D, hidden]``, ``o`` ``[hidden, H·D]``."""
        hd, hidden = q.shape
        if heads < 1 or hd % heads:
            raise UsageError(f"q's {hd} output features are not {heads} heads of equal width")
        d = hd // heads
        kvd = k.shape[0]
        if tuple(v.shape) != tuple(k.shape) or k.shape[1] != hidden or kvd % d or tuple(o.shape) != (hidden, hd):
            raise UsageError(
                f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} and o {tuple(o.shape)} are not "
                "[H·D, hidden], [Hkv·D, hidden], [Hkv·D, hidden], [hidden, H·D]"
            )
        layer = cls(hidden, heads, kvd // d, d, group, causal=causal, dtype=q.dtype, device=q.device)
        with torch.no_grad():
            layer.wq.copy_(q.t())
            layer.wkv.copy_(torch.cat([k.t(), v.t()], dim=1))
            layer.wo.copy_(o.t())
        return layer

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's ``q`` ``[..., s, H, D]`` and ``kv`` ``[..., s, 2, Hkv, D]`` of ``x``."""
        q = (x @ self.wq).unflatten(-1, (self.heads, self.head_dim))
        kv = (x @ self.wkv).unflatten(-1, (2, self.kv_heads, self.head_dim))
        return q, kv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: this rank's positions ``[s, hidden]`` (``[world, s, hidden]`` on one GPU); returns
        the same positions of the layer's output."""
        q, kv = self.project(x)
        o = ops.sequence_parallel_attention(q.contiguous(), kv.contiguous(), self.group, causal=self.causal)
        return o.flatten(-2) @ self.wo
