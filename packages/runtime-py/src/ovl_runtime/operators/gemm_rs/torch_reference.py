"""GEMM+ReduceScatter's torch references (float32)."""

from __future__ import annotations

import torch

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.tensors import matrix, scatter_rows, slab, sum_over_ranks


def product(m: Manifest, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """One rank's ``A @ B`` (float32), ``A`` ``[M, K]``, ``B`` ``[K, N]``."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    return matrix(inputs["A"], (M,), K, "reference.inputs.A").float() @ matrix(inputs["B"], (K,), N, "reference.inputs.B").float()


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    return scatter_rows(m, product(m, inputs), rank)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    part = sum_over_ranks(len(inputs), lambda q: product(m, inputs[q]))
    return [slab(part, *rank_rows(m, r)) for r in range(len(inputs))]
