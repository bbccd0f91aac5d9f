"""The numpy references of the operators a manifest claims (float64), each from its operator's ``reference`` module,
and the part of a rank's output buffer a reference describes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._manifest.types import Manifest
from ..operators.a2a_gemm import reference as a2a_gemm
from ..operators.ag_attention import reference as ag_attention
from ..operators.ag_gemm import reference as ag_gemm
from ..operators.ag_moe import reference as ag_moe
from ..operators.collectives import reference as collectives
from ..operators.gemm_ar import reference as gemm_ar
from ..operators.gemm_rs import reference as gemm_rs
from ..operators.grouped_gemm import reference as grouped_gemm
from ..operators.mlp import reference as mlp
from ..operators.moe_rs import reference as moe_rs
from .arrays import as_matrix, shard

#: Each operator's numpy reference, by the manifest's operator name.
NUMPY_REFERENCES: dict[str, Callable[[Manifest, list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]], list[np.ndarray]]] = {
    "ag-gemm": ag_gemm.reference,
    "gemm-rs": gemm_rs.reference,
    "gemm-ar": gemm_ar.reference,
    "a2a-gemm": a2a_gemm.reference,
    "ag-gemm-silu": mlp.reference,
    "ag-grouped-gemm": grouped_gemm.reference,
    "ag-attention": ag_attention.reference,
    "ag-moe": ag_moe.reference,
    "moe-rs": moe_rs.reference,
    "all-gather": collectives.reference,
    "reduce-scatter": collectives.reference,
    "all-reduce": collectives.reference,
}
#: Operators whose output is row-sharded (each rank holds its rows, or all ``M`` rows of which its slab is meant).
ROW_SHARDED_OUTPUTS = ("gemm-rs", "reduce-scatter", "ag-attention", "moe-rs")


def references(m: Manifest, inputs: list[dict[str, np.ndarray]]) -> list[np.ndarray]:
    """Per rank, the expected output (float64) from each rank's input buffers.

    ``inputs[rank]`` maps the keys of ``reference.inputs`` to that rank's buffer contents
    as they were when the launch started.
    """
    f64 = [{k: v.astype(np.float64) for k, v in d.items()} for d in inputs]
    return NUMPY_REFERENCES[m.reference.operator](m, f64, inputs)


def output_view(m: Manifest, out: np.ndarray, rank: int) -> np.ndarray:
    """The part of a rank's output buffer the reference describes."""
    ref = m.reference
    if ref.operator in ROW_SHARDED_OUTPUTS:
        return shard(m, out, rank, ref.N, "reference.output")
    if ref.operator == "ag-moe":
        return as_matrix(out, (out.size // ref.N,), ref.N, "reference.output")
    return as_matrix(out, (ref.M,), ref.N, "reference.output")
