"""AllGather+GEMM's torch references (float32)."""

from __future__ import annotations

import torch

from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, matrix, shard, stacked_shards


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    K, N = m.reference.K, m.reference.N
    full = gather_rows(m, shard(m, inputs["A"], rank, K, "reference.inputs.A"))
    return full @ matrix(inputs["B"], (K,), N, "reference.inputs.B").float()


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    K, N = m.reference.K, m.reference.N
    full = stacked_shards(m, inputs, "A", K)
    return [full @ matrix(x["B"], (K,), N, "reference.inputs.B").float() for x in inputs]
