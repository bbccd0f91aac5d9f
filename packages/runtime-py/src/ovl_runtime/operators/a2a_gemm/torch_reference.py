"""AllToAll+GEMM's torch references (float32)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..._manifest.types import Manifest
from ..._reference.tensors import matrix


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    recv = torch.empty(M, K, device=inputs["A"].device, dtype=torch.float32)
    dist.all_to_all_single(recv, matrix(inputs["A"], (M,), K, "reference.inputs.A").float().contiguous())
    return recv @ matrix(inputs["B"], (K,), N, "reference.inputs.B").float()


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    sends = [matrix(x["A"], (M,), K, "reference.inputs.A").float() for x in inputs]
    rows = M // len(inputs)
    return [
        torch.cat([s[r * rows : (r + 1) * rows] for s in sends]) @ matrix(x["B"], (K,), N, "reference.inputs.B").float()
        for r, x in enumerate(inputs)
    ]
