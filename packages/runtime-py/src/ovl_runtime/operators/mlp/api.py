"""The tensor-parallel MLP as two overlapped launches: AllGather + gate/up GEMM + SiLU-mul, then
GEMM + ReduceScatter.

::

    from ovl_runtime.ops import tp_mlp

    y = tp_mlp(x_shard, w_gate_up, w_down, group)

``x`` is this rank's token rows ``[m, hidden]``; ``w_gate_up`` this rank's ``[hidden, 2·I]``
laid out as ``[W_gate | W_up]`` (its I intermediate columns of each); ``w_down`` its
``[I, hidden]``. Returns this rank's ``m`` rows of ``Σ_r (silu(X W_gate,r) ⊙ (X W_up,r)) W_down,r``
with X every rank's rows. The first launch (``ag-gemm-silu``, the built-in ``gemm_silu_mul``
body) gathers X behind the GEMM and writes ``silu(gate) * up`` in its epilogue (fp32
accumulators, silu in fp32, one rounding to x's dtype); its output is passed as the second launch's A
(``matmul_reduce_scatter`` binds it, no copy, unless its slabs need padding to whole row blocks).
Tensors, groups, checks and CUDA-graph capture are as ``ovl_runtime.ops`` describes.
"""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ..._torch_api.tensors import local_shape, same_dtype
from ...groups import resolve_group
from ..ag_gemm.api import all_gather_matmul
from ..gemm_rs.api import matmul_reduce_scatter
from . import autograd as _autograd  # noqa: F401 - the op and its backward, registered
from .op import _ag_silu_impl, intermediate
from .silu_mul import silu_mul

__all__ = ["all_gather_matmul_silu_mul", "tp_mlp"]


def all_gather_matmul_silu_mul(x: torch.Tensor, w_gate_up: torch.Tensor, group: Any) -> torch.Tensor:
    """``silu(X @ W_gate) * (X @ W_up)`` ``[world·m, I]`` with X = ``cat(x over ranks)`` and
    ``w_gate_up = [W_gate | W_up]`` ``[hidden, 2·I]``; the gather overlaps the GEMM.

    Where autograd records (grad enabled and ``x`` or ``w_gate_up`` requiring grad) it runs
    ``all_gather_matmul`` and then SiLU-mul (``ovl_runtime.operators.mlp.silu_mul``: one pass forward, one backward)
    instead of the fused kernel: the gate/up product is kept for the backward, as torch's layer keeps
    it, rather than recomputed there (the fused op's backward recomputes it: a GEMM of the forward's
    size costs a training step more than the fused epilogue saves)."""
    g = resolve_group(group)
    if torch.is_grad_enabled() and (x.requires_grad or w_gate_up.requires_grad):
        intermediate(w_gate_up)
        return silu_mul(all_gather_matmul(x, w_gate_up, g))
    return call(torch.ops.ovl.all_gather_matmul_silu_mul, _ag_silu_impl, x, w_gate_up, g.name)


def tp_mlp(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor, group: Any) -> torch.Tensor:
    """This rank's rows of the tensor-parallel MLP (see the module docstring): two launches. The three tensors' dimensions
    and shared element type are checked first, so a ``w_down`` of another dtype is refused before the first launch, not
    after it (each launch checks that its tensors' type is one the operators take)."""
    g = resolve_group(group)
    for t, what in ((x, "x"), (w_gate_up, "w_gate_up"), (w_down, "w_down")):
        local_shape(t, g, what, 2)
    same_dtype("tp_mlp", x=x, w_gate_up=w_gate_up, w_down=w_down)
    return matmul_reduce_scatter(all_gather_matmul_silu_mul(x, w_gate_up, group), w_down, group)
