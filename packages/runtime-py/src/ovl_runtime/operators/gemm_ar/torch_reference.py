"""GEMM+AllReduce's torch references (float32)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..._manifest.types import Manifest
from ..._reference.tensors import sum_over_ranks
from ..gemm_rs.torch_reference import product


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    part = product(m, inputs)
    dist.all_reduce(part)
    return part


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    part = sum_over_ranks(len(inputs), lambda q: product(m, inputs[q]))
    return [part for _ in inputs]
