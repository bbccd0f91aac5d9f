"""GEMM+ReduceScatter as Python functions: ``matmul_reduce_scatter`` (``x`` ``[M, k]``, ``w`` ``[k, N]`` this rank's
slice of the depth → this rank's ``M / world`` rows of ``Σ_ranks x @ w``) and ``fused_matmul_reduce_scatter``
(PyTorch's argument list)."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ...errors import UsageError
from ...groups import resolve_group
from . import autograd as _autograd  # noqa: F401 - the op and its backward, registered
from .op import _matmul_reduce_scatter_impl


def matmul_reduce_scatter(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """This rank's rows of ``Σ_ranks x @ w`` (rows split evenly); the scatter overlaps the GEMM."""
    return call(torch.ops.ovl.matmul_reduce_scatter, _matmul_reduce_scatter_impl, x, w, resolve_group(group).name)


def fused_matmul_reduce_scatter(A: torch.Tensor, B: torch.Tensor, reduce_op: str, scatter_dim: int, group_name: str) -> torch.Tensor:
    """``torch.ops.symm_mem.fused_matmul_reduce_scatter``'s arguments (``reduce_op`` "sum", ``scatter_dim`` 0)."""
    if reduce_op != "sum":
        raise UsageError(f"fused_matmul_reduce_scatter reduces with sum, not {reduce_op!r}")
    g = resolve_group(group_name)
    if scatter_dim != 0:
        raise UsageError(f"fused_matmul_reduce_scatter scatters along rows (scatter_dim 0), not {scatter_dim}")
    return matmul_reduce_scatter(A, B, g)
