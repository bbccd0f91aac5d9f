"""MoE down-projection as a PyTorch function (TileLink's GroupGEMM + Scatter + TopK-reduce + ReduceScatter)::

    import ovl_runtime.ops as moe

    y = moe.moe_grouped_matmul_reduce_scatter(h, topk_ids, topk_weights, w2, group)

Tensor-parallel experts: each rank holds the ``I/W`` slice of every expert. For a one-GPU group
(:class:`~ovl_runtime.groups.OneGpuGroup`, every tensor carrying the rank first):

- ``h [W, T·k, I/W]``: part 1's activations, rows in token-slot order ``t·k + j`` (all T tokens);
- ``topk_ids [W, T, k]`` int32 and ``topk_weights [W, T, k]``: the routing, the same on every rank;
- ``w [W, E, I/W, H]``: each rank's slice of the experts' down-projections.

Returns ``[W, T/W, H]``: rank r's token rows ``r·T/W ..`` of
``Σ_ranks Σ_j topk_weights[t, j] · (h_r[t·k + j] @ w_r[topk_ids[t, j]])``. The operator is the
compiled ``moe-rs`` manifest (``ovl emit moe-rs``, found or compiled through ``_kernels.library``, run
by ``BoundOperator``): routing tables and per-slab notify targets on the device (no host sync), the
compiled group GEMM body notifying each token slab's owner, and ``ovl_runtime.operators.moe_rs.kernels``'s reducer
summing each slab as soon as it is complete. By default one operator serves every token count T that is a multiple
of the world (``ovl emit moe-rs --any-rows``: T a run-time argument, a new T compiles nothing), running the grouped
GEMM then the group's reduce-scatter below the compiler's crossover; ``OVL_ANY_ROWS=0`` compiles one per T. Inputs are
checked before any launch (a call of no tokens before anything is compiled). A call is
asynchronous on the current stream; :func:`synchronize` waits and raises ``WaitTimeout`` if a
bounded wait gave up.

Under ``torchrun`` (a process group, one rank per GPU) the tensors are this rank's own, without
the leading W: ``h [T·k, I/W]``, ``topk_ids`` / ``topk_weights [T, k]``, ``w [E, I/W, H]`` →
``[T/W, H]``; ``partial`` and the signal slots are symmetric memory, and the first call of a
shape checks that every rank passes the same shapes. ``topk_weights`` are used in fp32.
"""

from __future__ import annotations

from typing import Any

import torch

from ..._torch_api.dispatch import call
from ..._torch_api.registry import bound_items
from ..._torch_api.tensors import call_dtype
from ...groups import resolve_group
from . import autograd as _autograd  # noqa: F401 - the op and its backward, registered
from .op import WHAT, _impl

__all__ = ["moe_grouped_matmul_reduce_scatter", "synchronize"]


def moe_grouped_matmul_reduce_scatter(
    h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group: Any
) -> torch.Tensor:
    """MoE down-projection: each token slot's rows multiplied by its expert, weighted, summed over the token's k
    experts and over the ranks, each rank keeping its ``T/W`` token rows (see the module docstring)."""
    g = resolve_group(group)
    call_dtype(WHAT, g, h=h)  # w, with the rest, in the op's checks
    return call(torch.ops.ovl.moe_grouped_matmul_reduce_scatter, _impl, h, topk_ids, topk_weights, w, g.name)


def synchronize() -> None:
    """Wait for the device and raise the first wait timeout of any moe-rs call (``WaitTimeout``: rank, slab slot,
    seen, target)."""
    torch.cuda.synchronize()
    for op in bound_items("moe-rs"):
        op.check()
