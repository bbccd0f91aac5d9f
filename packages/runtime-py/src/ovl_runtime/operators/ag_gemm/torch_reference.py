"""AllGather+GEMM's torch references (float32); for fp8 operands ``(AG(A) @ B) · scale_a · scale_b`` from B held as
Bt ``[N, K]``, computed in float32 from the fp8 values (``torch._scaled_mm``'s semantics)."""

from __future__ import annotations

import torch

from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, matrix, shard, stacked_shards
from .reference import scaled


def _times_b(m: Manifest, full: torch.Tensor, x: dict[str, torch.Tensor]) -> torch.Tensor:
    """``full @ B`` in float32 (times both scales for the fp8 form)."""
    K, N = m.reference.K, m.reference.N
    if not scaled(m):
        return full.float() @ matrix(x["B"], (K,), N, "reference.inputs.B").float()
    b = matrix(x["B"], (N,), K, "reference.inputs.B").float().T
    scale = x["scale_a"].reshape(-1)[0].float() * x["scale_b"].reshape(-1)[0].float()
    return (full.float() @ b) * scale


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    K = m.reference.K
    full = gather_rows(m, shard(m, inputs["A"], rank, K, "reference.inputs.A"))
    return _times_b(m, full, inputs)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    K = m.reference.K
    full = stacked_shards(m, inputs, "A", K)
    return [_times_b(m, full, x) for x in inputs]
