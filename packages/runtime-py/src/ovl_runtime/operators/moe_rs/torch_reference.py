"""MoE part 2's torch references (float32)."""

from __future__ import annotations

import torch

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.tensors import scatter_rows, slab, sum_over_ranks
from ..ag_moe.torch_reference import moe_matmul


def moe_rs_partial(h: torch.Tensor, w: torch.Tensor, topk: torch.Tensor, weights: torch.Tensor, M: int, K: int, N: int) -> torch.Tensor:
    """moe-rs, one rank's contribution ``[M, N]`` in float32: ``Σ_j weights[t, j] · (h[t·k + j] @ W[topk[t, j]])``."""
    ids = topk.reshape(M, -1).long()
    k = ids.shape[1]
    y = moe_matmul(h.reshape(M * k, K).float(), w, ids.reshape(-1, 1), K, N)  # one "token" per slot
    return (y * weights.reshape(-1, 1).float()).reshape(M, k, N).sum(1)


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    return scatter_rows(m, moe_rs_partial(inputs["A"], inputs["B"], inputs["topk"], inputs["weights"], M, K, N), rank)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    M, N, K = m.reference.M, m.reference.N, m.reference.K
    summed = sum_over_ranks(
        len(inputs), lambda q: moe_rs_partial(inputs[q]["A"], inputs[q]["B"], inputs[q]["topk"], inputs[q]["weights"], M, K, N)
    )
    return [slab(summed, *rank_rows(m, r)) for r in range(len(inputs))]
