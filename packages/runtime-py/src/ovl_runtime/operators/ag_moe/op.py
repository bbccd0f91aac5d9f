"""MoE part 1's torch.library op ``ovl::moe_all_gather_grouped_matmul`` (AllGather + Gather + GroupGEMM, the routing
tables built on the device) and its fake. By default one operator serves every token count of its range (``call_key``:
M, all ranks' tokens, a run-time argument; below the compiler's crossover or outside the range it runs the group's
all-gather then the grouped GEMM); ``OVL_ANY_ROWS=0`` compiles one per token count."""

from __future__ import annotations

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import bound_operator
from ..._torch_api.tensors import DTYPES, call_dtype, check_device, empty_rows, local_shape, rank_views
from ...errors import UsageError
from ...groups import Group, resolve_group


def routing_topk(topk_ids: torch.Tensor, g: Group, tokens: int, experts: int) -> int:
    """k of every rank's ``[tokens, k]`` int32 routing, checked (shapes only: the ids are on the device)."""
    what = "moe_all_gather_grouped_matmul: topk_ids"
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dtype != torch.int32:
        raise UsageError(f"{what} must be an int32 torch.Tensor, got {getattr(topk_ids, 'dtype', type(topk_ids).__name__)}")
    want = 3 if g.stacked else 2
    if topk_ids.dim() != want or topk_ids.shape[-2] != tokens or (g.stacked and topk_ids.shape[0] != g.world):
        lead = f"[{g.world}, {tokens}, k]" if g.stacked else f"[{tokens}, k]"
        raise UsageError(f"{what} must be {lead} (every rank's tokens, k experts each), got {tuple(topk_ids.shape)}")
    check_device(topk_ids, g, what)
    if not topk_ids.is_contiguous():
        raise UsageError(f"{what} must be contiguous")
    k = int(topk_ids.shape[-1])
    if not 1 <= k <= experts:
        raise UsageError(f"{what}: top-k ({k}) must be between 1 and the number of experts ({experts})")
    return k


def _moe_impl(x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group_name: str, validate: bool) -> torch.Tensor:
    g = resolve_group(group_name)
    what = "moe_all_gather_grouped_matmul"
    local_shape(x, g, "x", 2), local_shape(w, g, "w", 3)
    call_dtype(what, g, x=x, w=w)
    xs, ws = rank_views(x, g, "x", 2), rank_views(w, g, "w", 3)
    rows, hidden = xs[0].shape
    experts, hidden2, n = ws[0].shape
    if hidden != hidden2:
        raise UsageError(f"{what}: x is [{rows}, {hidden}] but w is [{experts}, {hidden2}, {n}]; the hidden sizes differ")
    if rows == 0:  # before any key is made or compiled: a call of no tokens is refused
        raise UsageError(f"{what}: x has no tokens (a call needs at least one token per rank)")
    topk = routing_topk(topk_ids, g, g.world * rows, experts)
    if validate:  # a host sync: the ids are read back before the launch
        bad = ((topk_ids < 0) | (topk_ids >= experts)).nonzero()
        if bad.numel():
            where = tuple(int(v) for v in bad[0].tolist())
            raise UsageError(f"{what}: topk_ids{list(where)} = {int(topk_ids[where])} is not an expert of [0, {experts})")
    # The operator for every token count where this one is in its range (``call_key``), else the one of this count.
    key = call_key("ag-moe", g.world, g.world * rows, n, hidden, DTYPES[x.dtype], experts=experts, topk=topk)
    op = bound_operator(key, g, what)
    out = empty_rows(g, g.world * rows * topk, n, x)
    op.run({"A": x, "B": w, "topk": topk_ids}, out)
    return out


@torch.library.custom_op("ovl::moe_all_gather_grouped_matmul", mutates_args=())
def _moe_op(x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group_name: str, validate: bool = False) -> torch.Tensor:
    return _moe_impl(x, topk_ids, w, group_name, validate)


@_moe_op.register_fake
def _(x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group_name: str, validate: bool = False) -> torch.Tensor:
    return x.new_empty((*x.shape[:-2], topk_ids.shape[-2] * topk_ids.shape[-1], w.shape[-1]))
