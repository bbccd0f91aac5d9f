"""Sequence-parallel attention's torch.library op ``ovl::sequence_parallel_attention`` and its fake. By default one
operator serves every sequence length of its range (``call_key``: S, every rank's positions, a run-time argument;
below the compiler's crossover or outside the range it runs the group's all-gather of K/V then torch's
scaled_dot_product_attention); ``OVL_ANY_ROWS=0`` compiles one per length."""

from __future__ import annotations

import torch

from ..._kernels.library import call_key
from ..._torch_api.registry import bound_operator
from ..._torch_api.tensors import DTYPES, call_dtype, local_shape, rank_views
from ...errors import UsageError
from ...groups import Group, resolve_group


def _attention_shapes(q: torch.Tensor, kv: torch.Tensor, g: Group) -> tuple[int, int, int, int]:
    """``(s, H, Hkv, D)`` of one rank's ``q`` ``[s, H, D]`` and ``kv`` ``[s, 2, Hkv, D]``, checked."""
    what = "sequence_parallel_attention"
    s, heads, d = local_shape(q, g, "q", 3)
    s2, two, kv_heads, d2 = local_shape(kv, g, "kv", 4)
    if two != 2 or s2 != s or d2 != d:
        raise UsageError(
            f"{what}: q is [{s}, {heads}, {d}], so kv must be [{s}, 2, kv_heads, {d}] (keys then values); got {[s2, two, kv_heads, d2]}"
        )
    if min(s, heads, kv_heads, d) < 1:
        raise UsageError(f"{what}: q {[s, heads, d]} and kv {[s2, two, kv_heads, d2]} need every size >= 1")
    if heads % kv_heads:
        raise UsageError(f"{what}: {heads} query heads do not share {kv_heads} kv heads evenly (heads must be a multiple of kv_heads)")
    call_dtype(what, g, q=q, kv=kv)  # before the device and layout checks of rank_views
    return s, heads, kv_heads, d


def _attention_impl(q: torch.Tensor, kv: torch.Tensor, group_name: str, causal: bool) -> torch.Tensor:
    g = resolve_group(group_name)
    s, heads, kv_heads, d = _attention_shapes(q, kv, g)
    rank_views(q, g, "q", 3), rank_views(kv, g, "kv", 4)  # dtype, device, layout and alignment
    lead = q.shape[:-3]
    # The operator for every sequence length where S is in its range (``call_key``), else the one of this S.
    key = call_key("ag-attention", g.world, g.world * s, heads * d, 2 * kv_heads * d, DTYPES[q.dtype], heads=heads, causal=causal)
    op = bound_operator(key, g, "sequence_parallel_attention")
    out = torch.empty_like(q)
    op.run({"Q": q.view(*lead, s, heads * d), "KV": kv.view(*lead, s, 2 * kv_heads * d)}, out.view(*lead, s, heads * d))
    return out


@torch.library.custom_op("ovl::sequence_parallel_attention", mutates_args=())
def _sp_attention_op(q: torch.Tensor, kv: torch.Tensor, group_name: str, causal: bool) -> torch.Tensor:
    return _attention_impl(q, kv, group_name, causal)


@_sp_attention_op.register_fake
def _(q: torch.Tensor, kv: torch.Tensor, group_name: str, causal: bool) -> torch.Tensor:
    return torch.empty_like(q)
