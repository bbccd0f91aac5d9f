"""The collectives' torch references (float32) over their single input."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, matrix, scatter_rows, shard, slab, stacked_shards, sum_over_ranks


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    ref = m.reference
    M, N = ref.M, ref.N
    (key,) = ref.inputs
    x = inputs[key].float()
    where = f"reference.inputs.{key}"
    if ref.operator == "all-gather":
        return gather_rows(m, shard(m, x, rank, N, where))
    x = matrix(x, (M,), N, where).contiguous()
    if ref.operator == "all-reduce":
        dist.all_reduce(x)
        return x
    return scatter_rows(m, x, rank)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    ref = m.reference
    M, N = ref.M, ref.N
    world = len(inputs)
    (key,) = ref.inputs
    if ref.operator == "all-gather":
        full = stacked_shards(m, inputs, key, N)
        return [full for _ in range(world)]
    summed = sum_over_ranks(world, lambda q: matrix(inputs[q][key], (M,), N, f"reference.inputs.{key}").float())
    return [summed if ref.operator == "all-reduce" else slab(summed, *rank_rows(m, r)) for r in range(world)]
