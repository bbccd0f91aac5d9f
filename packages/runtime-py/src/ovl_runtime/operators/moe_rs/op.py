"""MoE part 2's torch.library op ``ovl::moe_grouped_matmul_reduce_scatter`` (GroupGEMM + Scatter + TopK-reduce +
ReduceScatter, routing on the device) and its fake; its inputs are checked before any launch (see ``api``). By default
one operator serves every token count of its range (``call_key``: T, all ranks' tokens, a run-time argument; below the
compiler's crossover or outside the range it runs the grouped GEMM then the group's reduce-scatter); ``OVL_ANY_ROWS=0``
compiles one per token count."""

from __future__ import annotations

from typing import Any

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import bound_operator
from ..._torch_api.tensors import DTYPES, call_dtype, check_device, empty_rows, local_shape, rank_views
from ...errors import UsageError
from ...groups import Group, resolve_group
from .kernels import check_moe_rs

WHAT = "moe_grouped_matmul_reduce_scatter"


def _routing(t: Any, g: Group, tokens: int, what: str, dtype: torch.dtype | None) -> None:
    if not isinstance(t, torch.Tensor) or (dtype is not None and t.dtype != dtype):
        raise UsageError(f"{WHAT}: {what} must be a {dtype or 'floating'} torch.Tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    lead = (g.world,) if g.stacked else ()
    if tuple(t.shape[:-1]) != (*lead, tokens):
        want = ", ".join(str(x) for x in (*lead, tokens, "k"))
        raise UsageError(f"{WHAT}: {what} must be [{want}] (the routing of all tokens, on every rank), got {tuple(t.shape)}")
    check_device(t, g, f"{WHAT}: {what}")
    if not t.is_contiguous():
        raise UsageError(f"{WHAT}: {what} must be contiguous")


def _impl(h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    local_shape(h, g, "h", 2), local_shape(w, g, "w", 3)
    call_dtype(WHAT, g, h=h, w=w)
    hs, ws = rank_views(h, g, "h", 2), rank_views(w, g, "w", 3)
    slots, inter = hs[0].shape
    if slots == 0 or (isinstance(topk_ids, torch.Tensor) and topk_ids.dim() >= 2 and topk_ids.shape[-2] == 0):
        # Before anything else is checked, a key made or compiled: a call of no tokens is refused.
        raise UsageError(f"{WHAT}: no tokens (h has {slots} slot rows); a call needs at least one token per rank")
    experts, inter2, hidden = ws[0].shape
    if inter != inter2:
        raise UsageError(f"{WHAT}: h is [{slots}, {inter}] but w is [{experts}, {inter2}, {hidden}]; the intermediate sizes differ")
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dim() != (3 if g.stacked else 2):
        raise UsageError(f"{WHAT}: topk_ids must be {'[W, T, k]' if g.stacked else '[T, k]'}, got {tuple(getattr(topk_ids, 'shape', ()))}")
    tokens, k = int(topk_ids.shape[-2]), int(topk_ids.shape[-1])
    _routing(topk_ids, g, tokens, "topk_ids", torch.int32)
    _routing(topk_weights, g, tokens, "topk_weights", None)
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
    # The operator for every token count where this one is in its range (``call_key``), else the one of this count.
    key = call_key("moe-rs", g.world, tokens, hidden, inter, DTYPES[h.dtype], experts=experts, topk=k)
    op = bound_operator(key, g, WHAT)
    out = empty_rows(g, sz.rows_per_rank, hidden, h)
    op.run({"A": h, "B": w, "topk": topk_ids, "weights": topk_weights}, out)
    return out


@torch.library.custom_op("ovl::moe_grouped_matmul_reduce_scatter", mutates_args=())
def _op(h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _impl(h, topk_ids, topk_weights, w, group_name)


@_op.register_fake
def _(h: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    rows = topk_ids.shape[-2] // g.world
    return h.new_empty((g.world, rows, w.shape[-1]) if g.stacked else (rows, w.shape[-1]))
