"""The MLP's first stage (``ag-gemm-silu``) torch references (float32)."""

from __future__ import annotations

import torch

from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, matrix, shard, stacked_shards


def silu_mul(full: torch.Tensor, b: torch.Tensor, K: int, N: int) -> torch.Tensor:
    """ag-gemm-silu: ``silu(full @ W[:, :N]) * (full @ W[:, N:])`` with W = ``b`` as ``[K, 2N]``."""
    w = matrix(b, (K,), 2 * N, "reference.inputs.B").float()
    return torch.nn.functional.silu(full @ w[:, :N]) * (full @ w[:, N:])


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    K, N = m.reference.K, m.reference.N
    return silu_mul(gather_rows(m, shard(m, inputs["A"], rank, K, "reference.inputs.A")), inputs["B"], K, N)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    K, N = m.reference.K, m.reference.N
    full = stacked_shards(m, inputs, "A", K)
    return [silu_mul(full, x["B"], K, N) for x in inputs]
