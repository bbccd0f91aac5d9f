"""MoE part 1 as a Python function: ``moe_all_gather_grouped_matmul(x, topk_ids, w, group)`` (``x`` this rank's
``[m, K]`` tokens, ``topk_ids`` the ``[world·m, k]`` int32 experts of every rank's tokens, ``w`` this rank's experts
``[E, K, n]`` → ``C [world·m·k, n]`` with ``C[t·k + j] = x_all[t] @ w[topk_ids[t, j]]``)."""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ...groups import resolve_group
from . import autograd as _autograd  # noqa: F401 - the op and its backward, registered
from .op import _moe_impl


def moe_all_gather_grouped_matmul(
    x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group: Any, *, validate: bool = False
) -> torch.Tensor:
    """MoE up-projection: every rank's tokens gathered, each token slot ``t·k + j`` multiplied by
    its expert ``w[topk_ids[t, j]]``; the gather overlaps the grouped GEMM and the routing tables
    are built on the device. Expert ids outside ``[0, E)`` are dropped on the device (their rows
    are not written); ``validate=True`` refuses them before the launch, at the cost of a host sync."""
    return call(torch.ops.ovl.moe_all_gather_grouped_matmul, _moe_impl, x, topk_ids, w, resolve_group(group).name, validate)
