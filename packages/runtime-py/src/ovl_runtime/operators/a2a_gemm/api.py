"""AllToAll+GEMM as a Python function: ``all_to_all_matmul`` (``x`` ``[M, K]`` this rank's send buffer, slab q going
to rank q → ``received @ w`` ``[M, N]``, slab q of ``received`` from rank q)."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ...groups import resolve_group
from . import autograd as _autograd  # noqa: F401 - the ops and their backward, registered
from .op import _all_to_all_matmul_impl


def all_to_all_matmul(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """``AllToAll(x) @ w``: slab q of this rank's ``x`` goes to rank q, and row slab q of the result
    is what rank q sent times ``w``; the exchange overlaps the GEMM.

    Where autograd records a gradient for ``w`` it runs ``torch.ops.ovl.all_to_all_matmul_exchanged``, which
    also returns the exchanged ``x`` the kernel already holds (a local copy, ``x``'s size), so the backward's
    ``AllToAll(x)ᵀ @ dy`` exchanges nothing again."""
    name = resolve_group(group).name
    if torch.is_grad_enabled() and w.requires_grad:
        return torch.ops.ovl.all_to_all_matmul_exchanged(x, w, name)[0]
    return call(torch.ops.ovl.all_to_all_matmul, _all_to_all_matmul_impl, x, w, name)
