"""MoE down-projection as a PyTorch function (TileLink's GroupGEMM + Scatter + TopK-reduce + ReduceScatter)::

    import ovl_runtime.moe_ops as moe

    y = moe.moe_grouped_matmul_reduce_scatter(h, topk_ids, topk_weights, w2, group)

Tensor-parallel experts: each rank holds the ``I/W`` slice of every expert. For a one-GPU group
(:class:`~ovl_runtime.groups.OneGpuGroup`, every tensor carrying the rank first):

- ``h [W, T·k, I/W]``: part 1's activations, rows in token-slot order ``t·k + j`` (all T tokens);
- ``topk_ids [W, T, k]`` int32 and ``topk_weights [W, T, k]``: the routing, the same on every rank;
- ``w [W, E, I/W, H]``: each rank's slice of the experts' down-projections.

Returns ``[W, T/W, H]``: rank r's token rows ``r·T/W ..`` of
``Σ_ranks Σ_j topk_weights[t, j] · (h_r[t·k + j] @ w_r[topk_ids[t, j]])``. The operator is the
compiled ``moe-rs`` manifest (``ovl emit moe-rs``, found or compiled through ``kernel_library``, run
by ``BoundOperator``): routing tables and per-slab notify targets on the device (no host sync), the
compiled group GEMM body notifying each token slab's owner, and ``ovl_runtime.moe_rs``'s reducer
summing each slab as soon as it is complete. Inputs are checked before any launch. A call is
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

from . import autograd
from . import ops as _ops  # noqa: F401 - sets CUDA_DEVICE_MAX_CONNECTIONS before CUDA starts
from .errors import UsageError
from .groups import resolve_group
from .kernel_library import KernelKey
from .moe_rs import check_moe_rs
from .ops import DTYPES, _empty, _operator, _operators, _per_rank, _rank_views

__all__ = ["moe_grouped_matmul_reduce_scatter", "synchronize"]

WHAT = "moe_grouped_matmul_reduce_scatter"


def _routing(t: Any, world: int | None, tokens: int, what: str, dtype: torch.dtype | None) -> None:
    if not isinstance(t, torch.Tensor) or (dtype is not None and t.dtype != dtype):
        raise UsageError(f"{WHAT}: {what} must be a {dtype or 'floating'} torch.Tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    lead = () if world is None else (world,)
    if tuple(t.shape[:-1]) != (*lead, tokens):
        want = ", ".join(str(x) for x in (*lead, tokens, "k"))
        raise UsageError(f"{WHAT}: {what} must be [{want}] (the routing of all tokens, on every rank), got {tuple(t.shape)}")
    if not t.is_cuda or not t.is_contiguous():
        raise UsageError(f"{WHAT}: {what} must be a contiguous CUDA tensor")


def _impl(h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    hs, ws = _rank_views(h, g, "h", 2), _rank_views(w, g, "w", 3)
    slots, inter = hs[0].shape
    experts, inter2, hidden = ws[0].shape
    if inter != inter2:
        raise UsageError(f"{WHAT}: h is [{slots}, {inter}] but w is [{experts}, {inter2}, {hidden}]; the intermediate sizes differ")
    if w.dtype != h.dtype:
        raise UsageError(f"{WHAT}: h is {h.dtype} but w is {w.dtype}")
    lead = g.world if g.stacked else None
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dim() != (3 if g.stacked else 2):
        raise UsageError(f"{WHAT}: topk_ids must be {'[W, T, k]' if g.stacked else '[T, k]'}, got {tuple(getattr(topk_ids, 'shape', ()))}")
    tokens, k = int(topk_ids.shape[-2]), int(topk_ids.shape[-1])
    _routing(topk_ids, lead, tokens, "topk_ids", torch.int32)
    _routing(topk_weights, lead, tokens, "topk_weights", None)
    if not topk_weights.is_floating_point() or topk_weights.shape != topk_ids.shape:
        raise UsageError(
            f"{WHAT}: topk_weights must be floating point and shaped like topk_ids, got {topk_weights.dtype} {tuple(topk_weights.shape)}"
        )
    if slots != tokens * k:
        raise UsageError(f"{WHAT}: h has {slots} rows per rank; T·k = {tokens}·{k} = {tokens * k}")
    try:
        sz = check_moe_rs(tokens, k, experts, inter, hidden, g.world, None)
    except ValueError as exc:
        raise UsageError(f"{WHAT}: {exc}") from exc
    key = KernelKey("moe-rs", g.world, tokens, hidden, inter, DTYPES[h.dtype], experts=experts, topk=k)
    op = _operator(key, g, WHAT)
    out = _empty(g, sz.rows_per_rank, hidden, h)
    ids = list(topk_ids.unbind(0)) if g.stacked else [topk_ids]
    wts = list(topk_weights.unbind(0)) if g.stacked else [topk_weights]
    op.run(
        [{"A": a, "B": b, "topk": t, "weights": x} for a, b, t, x in zip(hs, ws, ids, wts, strict=True)],
        _per_rank(out, g),
    )
    return out


@torch.library.custom_op("ovl::moe_grouped_matmul_reduce_scatter", mutates_args=())
def _op(h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _impl(h, topk_ids, topk_weights, w, group_name)


@_op.register_fake
def _(h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    rows = topk_ids.shape[-2] // g.world
    return h.new_empty((g.world, rows, w.shape[-1]) if g.stacked else (rows, w.shape[-1]))


autograd.register("ovl::moe_grouped_matmul_reduce_scatter")


def moe_grouped_matmul_reduce_scatter(
    h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group: Any
) -> torch.Tensor:
    """MoE down-projection: each token slot's rows multiplied by its expert, weighted, summed over the token's k
    experts and over the ranks, each rank keeping its ``T/W`` token rows (see the module docstring)."""
    if h.dtype not in DTYPES:
        raise UsageError(f"{WHAT}: h is {h.dtype}; the operator takes {', '.join(str(d) for d in DTYPES)}")
    return torch.ops.ovl.moe_grouped_matmul_reduce_scatter(h, topk_ids, topk_weights, w, resolve_group(group).name)


def synchronize() -> None:
    """Wait for the device and raise the first wait timeout of any moe-rs call (``WaitTimeout``: rank, slab slot,
    seen, target)."""
    torch.cuda.synchronize()
    for (dirname, _group), op in list(_operators.items()):
        if dirname.startswith("moe-rs") and not op.closed:
            op.check()
