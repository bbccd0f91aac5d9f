"""The torch references of the operators a manifest claims (float32), each from its operator's ``torch_reference``
module: under torchrun through NCCL collectives (``torch_reference``), or every rank's on this process's device
(``local_references``, the one-GPU mode); and the part of a rank's output buffer a reference describes."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .._manifest.types import Manifest
from ..operators.a2a_gemm import torch_reference as a2a_gemm
from ..operators.ag_attention import torch_reference as ag_attention
from ..operators.ag_gemm import torch_reference as ag_gemm
from ..operators.ag_moe import torch_reference as ag_moe
from ..operators.collectives import torch_reference as collectives
from ..operators.gemm_ar import torch_reference as gemm_ar
from ..operators.gemm_rs import torch_reference as gemm_rs
from ..operators.grouped_gemm import torch_reference as grouped_gemm
from ..operators.mlp import torch_reference as mlp
from ..operators.moe_rs import torch_reference as moe_rs
from .on_cpu import ROW_SHARDED_OUTPUTS
from .tensors import matrix, shard

#: Each operator's torch reference under torchrun, by the manifest's operator name.
TORCH_REFERENCES: dict[str, Callable[[Manifest, dict[str, torch.Tensor], int], torch.Tensor]] = {
    "ag-gemm": ag_gemm.torch_reference,
    "gemm-rs": gemm_rs.torch_reference,
    "gemm-ar": gemm_ar.torch_reference,
    "a2a-gemm": a2a_gemm.torch_reference,
    "ag-gemm-silu": mlp.torch_reference,
    "ag-grouped-gemm": grouped_gemm.torch_reference,
    "ag-attention": ag_attention.torch_reference,
    "ag-moe": ag_moe.torch_reference,
    "moe-rs": moe_rs.torch_reference,
    "all-gather": collectives.torch_reference,
    "reduce-scatter": collectives.torch_reference,
    "all-reduce": collectives.torch_reference,
}
#: Each operator's one-GPU (every rank on this device) torch references, by the manifest's operator name.
LOCAL_REFERENCES: dict[str, Callable[[Manifest, list[dict[str, torch.Tensor]]], list[torch.Tensor]]] = {
    "ag-gemm": ag_gemm.local_references,
    "gemm-rs": gemm_rs.local_references,
    "gemm-ar": gemm_ar.local_references,
    "a2a-gemm": a2a_gemm.local_references,
    "ag-gemm-silu": mlp.local_references,
    "ag-grouped-gemm": grouped_gemm.local_references,
    "ag-attention": ag_attention.local_references,
    "ag-moe": ag_moe.local_references,
    "moe-rs": moe_rs.local_references,
    "all-gather": collectives.local_references,
    "reduce-scatter": collectives.local_references,
    "all-reduce": collectives.local_references,
}


def torch_reference(m: Manifest, inputs: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """This rank's expected output (float32), from every rank's inputs via NCCL."""
    return TORCH_REFERENCES[m.reference.operator](m, inputs, rank)


def local_references(m: Manifest, inputs: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
    """Every rank's expected output (float32) from every rank's inputs, all on this process's
    device (the one-GPU mode: no process group). Same conventions as ``torch_reference``."""
    return LOCAL_REFERENCES[m.reference.operator](m, inputs)


def output_view(m: Manifest, out: torch.Tensor, rank: int) -> torch.Tensor:
    """The part of a rank's output buffer the reference describes (:func:`.on_cpu.output_view` on tensors)."""
    ref = m.reference
    if ref.operator in ROW_SHARDED_OUTPUTS:
        return shard(m, out, rank, ref.N, "reference.output")
    if ref.operator == "ag-moe":  # one row per token slot t·k + j
        return matrix(out, (out.numel() // ref.N,), ref.N, "reference.output")
    return matrix(out, (ref.M,), ref.N, "reference.output")
