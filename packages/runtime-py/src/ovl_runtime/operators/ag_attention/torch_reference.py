"""Sequence-parallel attention's torch references (float32)."""

from __future__ import annotations

import torch

from ..._manifest.shards import rank_rows
from ..._manifest.types import Manifest
from ..._reference.tensors import gather_rows, shard, stacked_shards
from .spec import attention_spec, torch_attention


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    kv = gather_rows(m, shard(m, inputs["KV"], rank, m.reference.K, "reference.inputs.KV"))
    return torch_attention(shard(m, inputs["Q"], rank, m.reference.N, "reference.inputs.Q"), kv, attention_spec(m), rank_rows(m, rank)[0])


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's device (the one-GPU
    mode: no process group)."""
    kv, a = stacked_shards(m, inputs, "KV", m.reference.K), attention_spec(m)
    return [
        torch_attention(shard(m, x["Q"], r, m.reference.N, "reference.inputs.Q"), kv, a, rank_rows(m, r)[0]) for r, x in enumerate(inputs)
    ]
