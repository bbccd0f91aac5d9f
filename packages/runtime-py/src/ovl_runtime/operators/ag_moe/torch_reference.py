"""MoE part 1's torch references (float32)."""

from __future__ import annotations

import torch

from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, shard, stacked_shards


def moe_matmul(full: torch.Tensor, w: torch.Tensor, topk: torch.Tensor, K: int, N: int) -> torch.Tensor:
    """ag-moe: ``C[t·k + j] = full[t] @ W[topk[t, j]]`` in float32 (W read as [E, K, N])."""
    ids = topk.reshape(full.shape[0], -1).long()
    k = ids.shape[1]
    w3 = w.reshape(-1, K, N).float()
    flat = ids.reshape(-1)
    c = torch.zeros(flat.numel(), N, device=full.device, dtype=torch.float32)
    for e in torch.unique(flat).tolist():
        slots = torch.nonzero(flat == e).squeeze(1)
        c[slots] = full[slots // k] @ w3[e]
    return c


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    ref = m.reference
    full = gather_rows(m, shard(m, inputs["A"], rank, ref.K, "reference.inputs.A"))
    return moe_matmul(full, inputs["B"], inputs["topk"], ref.K, ref.N)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    ref = m.reference
    full = stacked_shards(m, inputs, "A", ref.K)
    return [moe_matmul(full, x["B"], x["topk"], ref.K, ref.N) for x in inputs]
