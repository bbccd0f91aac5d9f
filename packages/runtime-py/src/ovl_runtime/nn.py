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
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from . import ops
from .errors import UsageError
from .groups import Group, resolve_group


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
        h = ops.all_gather_matmul(x, self.gate_up, self.group)
        gate, up = h.split(self.local, dim=-1)
        a = torch.nn.functional.silu(gate) * up
        return ops.matmul_reduce_scatter(a, self.down, self.group)
