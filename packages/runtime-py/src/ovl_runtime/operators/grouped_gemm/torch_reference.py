"""ag-grouped-gemm's torch references (float32), ``B`` read as ``[E, K, N]``."""

from __future__ import annotations

import torch

from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, shard, stacked_shards
from ...errors import ManifestError
from .reference import expert_blocks, expert_runs


def grouped_matmul(m: Manifest, full: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``C[rows of m-block mb] = full[rows] @ B[expert(mb)]`` in float32, B read as [E, K, N]."""
    K, N = m.reference.K, m.reference.N
    if b.numel() % (K * N) != 0:
        raise ManifestError("reference.inputs.B", f"buffer of {b.numel()} elements cannot be read as [E, {K}, {N}]")
    b3 = b.reshape(-1, K, N).float()
    bm, experts = expert_blocks(m)
    c = torch.zeros(full.shape[0], N, device=full.device, dtype=torch.float32)
    for lo, hi, e in expert_runs(experts, bm):
        c[lo:hi] = full[lo:hi] @ b3[e]
    return c


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    full = gather_rows(m, shard(m, inputs["A"], rank, m.reference.K, "reference.inputs.A"))
    return grouped_matmul(m, full, inputs["B"])


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    full = stacked_shards(m, inputs, "A", m.reference.K)
    return [grouped_matmul(m, full, x["B"]) for x in inputs]
