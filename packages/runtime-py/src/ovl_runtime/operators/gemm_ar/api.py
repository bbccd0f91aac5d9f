"""GEMM+AllReduce as a Python function: ``matmul_all_reduce`` (``x`` ``[M, k]``, ``w`` ``[k, N]`` this rank's slice
of the depth → ``Σ_ranks x @ w`` ``[M, N]`` on every rank)."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ...groups import resolve_group
from . import autograd as _autograd  # noqa: F401 - the op and its backward, registered
from .op import _matmul_all_reduce_impl


def matmul_all_reduce(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """``Σ_ranks x @ w`` on every rank (``w`` this rank's slice of the depth); the AllReduce
    overlaps the GEMM. Row counts off whole ``world × 128``-row blocks are padded with zero rows."""
    return call(torch.ops.ovl.matmul_all_reduce, _matmul_all_reduce_impl, x, w, resolve_group(group).name)
