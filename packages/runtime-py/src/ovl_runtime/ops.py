"""ovl's overlapped operators as PyTorch functions over the caller's tensors.

::

    import ovl_runtime.ops as ovl

    y = ovl.all_gather_matmul(x_shard, w, group)     # AllGather(x) @ w, the gather hidden behind the GEMM
    z = ovl.matmul_reduce_scatter(h, w2, group)      # ReduceScatter(h @ w2), the scatter hidden behind it

Semantics follow PyTorch's ``torch.ops.symm_mem.fused_all_gather_matmul`` /
``fused_matmul_reduce_scatter`` with the gather and scatter along rows (dimension 0):

- ``all_gather_matmul(x, w, group)``: ``x`` is this rank's ``[m, K]`` rows, ``w`` its
  ``[K, n]`` weight; returns ``cat(x over ranks) @ w``, ``[world·m, n]``.
  Under autograd, with ``w`` requiring grad, it records ``torch.ops.ovl.all_gather_matmul_gathered(x, w,
  group_name)``, which returns ``(cat(x over ranks) @ w, cat(x over ranks))``: the gathered rows copied from the
  kernel's buffer, for the weight gradient (see :mod:`ovl_runtime.autograd`).
- ``matmul_reduce_scatter(x, w, group)``: ``x`` is ``[M, k]``, ``w`` ``[k, N]`` (this rank's
  slice of the depth); returns this rank's ``M / world`` rows of ``Σ_ranks x @ w``.
- ``moe_all_gather_grouped_matmul(x, topk_ids, w, group)`` (MoE, TileLink's AG + Gather +
  GroupGEMM): ``x`` is this rank's ``[m, K]`` tokens, ``topk_ids`` the ``[world·m, k]`` int32
  experts of every rank's tokens (the same on every rank), ``w`` this rank's experts
  ``[E, K, n]``; returns ``C [world·m·k, n]`` with ``C[t·k + j] = x_all[t] @ w[topk_ids[t, j]]``.
  The routing tables are computed on the device (``ovl_runtime.moe_align``): no host sync.
- ``matmul_all_reduce(x, w, group)`` (GEMM+AllReduce): ``x`` ``[M, k]``, ``w`` ``[k, N]`` (this
  rank's slice of the depth); returns ``Σ_ranks x @ w``, ``[M, N]``, on every rank. The
  partitioned AllReduce (the CLI's default: a direct ReduceScatter by SM pushes, then an
  AllGather of each reduced slab from its owner), not the tile-wise one.
- ``all_to_all_matmul(x, w, group)`` (AllToAll+GEMM): ``x`` ``[M, K]`` is this rank's send
  buffer, slab q (``M / world`` rows) going to rank q; returns ``received @ w`` ``[M, N]``,
  where slab q of ``received`` came from rank q.
- ``sequence_parallel_attention(q, kv, group, causal=...)`` (AllGather + attention): ``q``
  ``[s, H, D]`` this rank's ``s = S / world`` query positions (rank r holds ``r·s`` onward),
  ``kv`` ``[s, 2, Hkv, D]`` their keys (``kv[:, 0]``) and values (``kv[:, 1]``); every rank's
  kv is gathered behind the attention. Returns ``softmax(q kᵀ / √D) v`` ``[s, H, D]`` (query
  head h reads kv head ``h // (H / Hkv)``: MHA and GQA; ``causal``: position i sees keys ≤ i).
- ``tp_mlp(x, w_gate_up, w_down, group)`` (the MLP chain, ``ovl_runtime.mlp``): AllGather +
  gate/up GEMM with the SiLU-mul epilogue, then GEMM+ReduceScatter on its output in place;
  ``all_gather_matmul_silu_mul`` is its first stage alone.
- ``moe_grouped_matmul_reduce_scatter(h, topk_ids, topk_weights, w, group)`` (MoE part 2,
  ``ovl_runtime.moe_ops``): GroupGEMM + Scatter + TopK-reduce + ReduceScatter, routing on the
  device.

``group`` is a ``torch.distributed`` process group (one rank per process, under torchrun),
a :class:`~ovl_runtime.groups.OneGpuGroup` (every rank in this process on one GPU: each
tensor then carries the rank as its leading dimension, ``[world, ...]``), or the name of
either. Both are registered with ``torch.library`` (``torch.ops.ovl.all_gather_matmul``,
``torch.ops.ovl.matmul_reduce_scatter``, taking the group's name), so ``torch.compile``
traces them as single ops; :func:`fused_all_gather_matmul` and
:func:`fused_matmul_reduce_scatter` take PyTorch's argument lists.

Kernels come from ovl's compiler (``ovl_runtime.kernel_library``): compiled once per
(operator, world, M, N, K, dtype) with the compiler's tuned configuration, found on the
kernel search path or compiled on demand, and bound to the group once (buffers, streams)
— later calls only copy this rank's rows in and launch. Row counts that the compiled
kernels cannot take as they are (ReduceScatter slabs off whole 128-row blocks) are padded
with zero rows and the padding dropped from the result. Inputs are checked before any
launch: dtype, device, contiguity, 16-byte alignment, shapes; under torchrun, the first
call of a shape also checks that every rank passes the same shapes.

Every operator has a backward pass (:mod:`ovl_runtime.autograd`: AllGather+GEMM's input gradient is a
GEMM+ReduceScatter and the reverse; attention's and the MoE operators' are plain torch and collectives).

A call is asynchronous on the current stream. Device-side waits are bounded: call
:func:`synchronize` to wait and raise ``WaitTimeout`` (rank, slot, value seen and
expected) if one gave up. Calls can be captured in a CUDA graph after one eager call.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import torch

from .gpu_onegpu import MAX_CONNECTIONS

# Every stream of the one-GPU mode needs a hardware queue of its own; read when CUDA starts.
if not torch.cuda.is_initialized():
    os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", str(MAX_CONNECTIONS))

from . import autograd as _autograd
from .bound import BoundOperator
from .errors import UsageError
from .groups import DistGroup, Group, resolve_group
from .kernel_library import KernelKey, manifest_for

__all__ = [
    "all_gather_matmul",
    "all_gather_matmul_silu_mul",  # noqa: F822 - resolved by __getattr__ (ovl_runtime.mlp)
    "all_to_all_matmul",
    "close_all",
    "fused_all_gather_matmul",
    "fused_matmul_reduce_scatter",
    "matmul_all_reduce",
    "matmul_reduce_scatter",
    "moe_all_gather_grouped_matmul",
    "moe_grouped_matmul_reduce_scatter",  # noqa: F822 - resolved by __getattr__ (ovl_runtime.moe_ops)
    "operators",
    "sequence_parallel_attention",
    "synchronize",
    "tp_mlp",  # noqa: F822 - resolved by __getattr__ (ovl_runtime.mlp)
]

DTYPES = {torch.bfloat16: "bf16"}
#: ReduceScatter slabs are padded to whole blocks of this many rows.
RS_ROW_BLOCK = 128

_operators: dict[tuple[str, str], BoundOperator] = {}


# ---- checks ----
def _rank_views(t: torch.Tensor, g: Group, what: str, dims: int) -> list[torch.Tensor]:
    """The per-rank views of ``t``: ``[world, ...]`` rows for a one-GPU group, ``t`` itself otherwise."""
    if not isinstance(t, torch.Tensor):
        raise UsageError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    want = dims + (1 if g.stacked else 0)
    if t.dim() != want:
        lead = f"[{g.world}, ...] (the rank first, for a one-GPU group)" if g.stacked else "this rank's tensor"
        raise UsageError(f"{what} must have {want} dimensions, {lead}; got shape {tuple(t.shape)}")
    if g.stacked and t.shape[0] != g.world:
        raise UsageError(f"{what} must carry {g.world} ranks along dimension 0; got shape {tuple(t.shape)}")
    if t.dtype not in DTYPES:
        raise UsageError(f"{what} is {t.dtype}; the compiled operators take {', '.join(str(d) for d in DTYPES)}")
    if not t.is_cuda:
        raise UsageError(f"{what} is on {t.device}; the operators run on CUDA tensors")
    if not t.is_contiguous():
        raise UsageError(f"{what} must be contiguous (row-major); call .contiguous() first")
    views = list(t.unbind(0)) if g.stacked else [t]
    for r, v in enumerate(views):
        if v.data_ptr() % 16:
            raise UsageError(f"{what} (rank {r}) starts at an address that is not 16-byte aligned, which the kernels' TMA loads need")
    return views


def _same_everywhere(g: Group, signature: tuple[Any, ...], what: str) -> None:
    """Under torchrun: every rank passes the same shapes (checked once per operator, before it is built)."""
    if not isinstance(g, DistGroup):
        return
    import torch.distributed as dist

    seen: list[Any] = [None] * g.world
    dist.all_gather_object(seen, signature, group=g.pg)
    differ = [r for r, s in enumerate(seen) if s != signature]
    if differ:
        raise UsageError(f"{what}: ranks pass different shapes: " + "; ".join(f"rank {r}: {s}" for r, s in enumerate(seen)))


def _operator(key: KernelKey, g: Group, what: str) -> BoundOperator:
    op = _operators.get((key.dirname, g.name))
    if op is None or op.closed:
        if torch.cuda.is_current_stream_capturing():
            raise UsageError(
                f"{what}: the first call of a shape compiles and loads its kernels and allocates its buffers, which a "
                "CUDA graph capture cannot do: call the operator once before capturing"
            )
        _same_everywhere(g, (key.op, key.m, key.n, key.k, key.dtype, key.experts, key.topk, key.heads, key.causal), what)
        op = BoundOperator(manifest_for(key), g)
        _operators[(key.dirname, g.name)] = op
    return op


def _empty(g: Group, rows: int, cols: int, like: torch.Tensor) -> torch.Tensor:
    shape = (g.world, rows, cols) if g.stacked else (rows, cols)
    return torch.empty(shape, dtype=like.dtype, device=like.device)


def _per_rank(t: torch.Tensor, g: Group) -> list[torch.Tensor]:
    return list(t.unbind(0)) if g.stacked else [t]


def _gemm_operands(x: torch.Tensor, w: torch.Tensor, g: Group, what: str) -> tuple[list[torch.Tensor], list[torch.Tensor], int, int, int]:
    """Each rank's ``x`` ``[rows, k]`` and ``w`` ``[k, n]``, checked, with ``rows, k, n``."""
    xs, ws = _rank_views(x, g, "x", 2), _rank_views(w, g, "w", 2)
    rows, k = xs[0].shape
    k2, n = ws[0].shape
    if k != k2:
        raise UsageError(f"{what}: x is [{rows}, {k}] but w is [{k2}, {n}]; their inner dimensions differ")
    if w.dtype != x.dtype:
        raise UsageError(f"{what}: x is {x.dtype} but w is {w.dtype}")
    return xs, ws, rows, k, n


#: The buffer an AllGather+GEMM's or AllToAll+GEMM's GEMM reads its moved rows from, as the compiler names it:
#: after a launch it holds ``AG(x)`` or ``A2A(x)``, which the weight gradient reuses.
OPERAND_BUFFER = "A"


# ---- the operators ----
def _all_gather_matmul(x: torch.Tensor, w: torch.Tensor, group_name: str, keep: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output, and with ``keep`` a copy of the gathered ``cat(x over ranks)`` the launch left in its buffer."""
    g = resolve_group(group_name)
    xs, ws, m, k, n = _gemm_operands(x, w, g, "all_gather_matmul")
    key = KernelKey("ag-gemm", g.world, g.world * m, n, k, DTYPES[x.dtype])
    return _run_moving(_operator(key, g, "all_gather_matmul"), g, xs, ws, x, (g.world * m, n, k), keep)


def _run_moving(
    op: BoundOperator, g: Group, xs: list[torch.Tensor], ws: list[torch.Tensor], x: torch.Tensor, shape: tuple[int, int, int], keep: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One launch of an operator that moves ``x`` before its GEMM (AllGather, AllToAll) on each rank's ``x`` and
    ``w`` (``shape``: rows, n, k): its ``[rows, n]`` output and, with ``keep``, a copy of its ``[rows, k]`` operand
    buffer, the moved ``x``."""
    rows, n, k = shape
    out = _empty(g, rows, n, x)
    op.run([{"A": a, "B": b} for a, b in zip(xs, ws)], _per_rank(out, g))
    if not keep:
        return out, None
    moved = _empty(g, rows, k, x)
    op.copy_buffer(OPERAND_BUFFER, _per_rank(moved, g))
    return out, moved


def _all_gather_matmul_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_gather_matmul(x, w, group_name, keep=False)[0]


def _all_gather_matmul_gathered_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    out, gathered = _all_gather_matmul(x, w, group_name, keep=True)
    assert gathered is not None
    return out, gathered


def _matmul_reduce_scatter_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    xs, ws, rows, k, n = _gemm_operands(x, w, g, "matmul_reduce_scatter")
    if rows % g.world:
        raise UsageError(f"matmul_reduce_scatter: {rows} rows do not split over {g.world} ranks (scatter along rows needs a multiple)")
    slab = rows // g.world
    padded = math.ceil(slab / RS_ROW_BLOCK) * RS_ROW_BLOCK
    if padded != slab:
        # Each rank's slab padded to whole row blocks with zero rows (their sums are dropped).
        xp = torch.zeros((*x.shape[:-2], g.world * padded, k), dtype=x.dtype, device=x.device)
        xp.unflatten(-2, (g.world, padded))[..., :slab, :].copy_(x.unflatten(-2, (g.world, slab)))
        xs = _rank_views(xp, g, "x", 2)
    key = KernelKey("gemm-rs", g.world, g.world * padded, n, k, DTYPES[x.dtype])
    op = _operator(key, g, "matmul_reduce_scatter")
    out = _empty(g, padded, n, x)
    op.run([{"A": a, "B": b} for a, b in zip(xs, ws)], _per_rank(out, g))
    return out if padded == slab else out[..., :slab, :].contiguous()


def _routing_views(topk_ids: torch.Tensor, g: Group, tokens: int, experts: int) -> tuple[list[torch.Tensor], int]:
    """Each rank's ``[tokens, k]`` int32 routing, checked (shapes only: the ids are on the device), with k."""
    what = "moe_all_gather_grouped_matmul: topk_ids"
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dtype != torch.int32:
        raise UsageError(f"{what} must be an int32 torch.Tensor, got {getattr(topk_ids, 'dtype', type(topk_ids).__name__)}")
    want = 3 if g.stacked else 2
    if topk_ids.dim() != want or topk_ids.shape[-2] != tokens or (g.stacked and topk_ids.shape[0] != g.world):
        lead = f"[{g.world}, {tokens}, k]" if g.stacked else f"[{tokens}, k]"
        raise UsageError(f"{what} must be {lead} (every rank's tokens, k experts each), got {tuple(topk_ids.shape)}")
    if not topk_ids.is_cuda or not topk_ids.is_contiguous():
        raise UsageError(f"{what} must be a contiguous CUDA tensor")
    k = int(topk_ids.shape[-1])
    if not 1 <= k <= experts:
        raise UsageError(f"{what}: top-k ({k}) must be between 1 and the number of experts ({experts})")
    return (list(topk_ids.unbind(0)) if g.stacked else [topk_ids]), k


def _moe_impl(x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group_name: str, validate: bool) -> torch.Tensor:
    g = resolve_group(group_name)
    what = "moe_all_gather_grouped_matmul"
    xs, ws = _rank_views(x, g, "x", 2), _rank_views(w, g, "w", 3)
    rows, hidden = xs[0].shape
    experts, hidden2, n = ws[0].shape
    if hidden != hidden2:
        raise UsageError(f"{what}: x is [{rows}, {hidden}] but w is [{experts}, {hidden2}, {n}]; the hidden sizes differ")
    if w.dtype != x.dtype:
        raise UsageError(f"{what}: x is {x.dtype} but w is {w.dtype}")
    ids, topk = _routing_views(topk_ids, g, g.world * rows, experts)
    if validate:  # a host sync: the ids are read back before the launch
        bad = ((topk_ids < 0) | (topk_ids >= experts)).nonzero()
        if bad.numel():
            where = tuple(int(v) for v in bad[0].tolist())
            raise UsageError(f"{what}: topk_ids{list(where)} = {int(topk_ids[where])} is not an expert of [0, {experts})")
    key = KernelKey("ag-moe", g.world, g.world * rows, n, hidden, DTYPES[x.dtype], experts=experts, topk=topk)
    op = _operator(key, g, what)
    out = _empty(g, g.world * rows * topk, n, x)
    op.run([{"A": a, "B": b, "topk": t} for a, b, t in zip(xs, ws, ids)], _per_rank(out, g))
    return out


@torch.library.custom_op("ovl::moe_all_gather_grouped_matmul", mutates_args=())
def _moe_op(x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group_name: str, validate: bool = False) -> torch.Tensor:
    return _moe_impl(x, topk_ids, w, group_name, validate)


@_moe_op.register_fake
def _(x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group_name: str, validate: bool = False) -> torch.Tensor:
    return x.new_empty((*x.shape[:-2], topk_ids.shape[-2] * topk_ids.shape[-1], w.shape[-1]))


def moe_all_gather_grouped_matmul(
    x: torch.Tensor, topk_ids: torch.Tensor, w: torch.Tensor, group: Any, *, validate: bool = False
) -> torch.Tensor:
    """MoE up-projection: every rank's tokens gathered, each token slot ``t·k + j`` multiplied by
    its expert ``w[topk_ids[t, j]]``; the gather overlaps the grouped GEMM and the routing tables
    are built on the device. Expert ids outside ``[0, E)`` are dropped on the device (their rows
    are not written); ``validate=True`` refuses them before the launch, at the cost of a host sync."""
    return torch.ops.ovl.moe_all_gather_grouped_matmul(x, topk_ids, w, resolve_group(group).name, validate)


def _fake_rows(x: torch.Tensor, group_name: str) -> tuple[Group, int]:
    g = resolve_group(group_name)
    return g, x.shape[-2]


@torch.library.custom_op("ovl::all_gather_matmul", mutates_args=())
def _ag_mm_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_gather_matmul_impl(x, w, group_name)


@_ag_mm_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g, m = _fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], g.world * m, w.shape[-1]))


@torch.library.custom_op("ovl::all_gather_matmul_gathered", mutates_args=())
def _ag_mm_gathered_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _all_gather_matmul_gathered_impl(x, w, group_name)


@_ag_mm_gathered_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    g, m = _fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], g.world * m, w.shape[-1])), x.new_empty((*x.shape[:-2], g.world * m, x.shape[-1]))


@torch.library.custom_op("ovl::matmul_reduce_scatter", mutates_args=())
def _mm_rs_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _matmul_reduce_scatter_impl(x, w, group_name)


@_mm_rs_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g, rows = _fake_rows(x, group_name)
    return x.new_empty((*x.shape[:-2], rows // g.world, w.shape[-1]))


def all_gather_matmul(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """``cat(x over the group's ranks, dim=0) @ w``; the gather overlaps the GEMM. See the module docstring.

    Where autograd records a gradient for ``w`` (grad enabled, ``w`` requiring grad) it runs
    ``torch.ops.ovl.all_gather_matmul_gathered``, which also returns the gathered ``x`` the kernel already
    holds (a local copy): the backward's ``AG(x)ᵀ @ dy`` reads it instead of gathering ``x`` again, as
    torch's layer keeps the gathered input of its GEMM (memory: ``[world·m, K]`` kept until the backward,
    where the plain op's backward keeps ``x`` and gathers it again)."""
    name = resolve_group(group).name
    if torch.is_grad_enabled() and w.requires_grad:
        return torch.ops.ovl.all_gather_matmul_gathered(x, w, name)[0]
    return torch.ops.ovl.all_gather_matmul(x, w, name)


def matmul_reduce_scatter(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """This rank's rows of ``Σ_ranks x @ w`` (rows split evenly); the scatter overlaps the GEMM."""
    return torch.ops.ovl.matmul_reduce_scatter(x, w, resolve_group(group).name)


def _local_shape(t: torch.Tensor, g: Group, what: str, dims: int) -> tuple[int, ...]:
    """The shape of one rank's ``t`` (dimensions and rank count checked, nothing else yet)."""
    if not isinstance(t, torch.Tensor):
        raise UsageError(f"{what} must be a torch.Tensor, not {type(t).__name__}")
    want = dims + (1 if g.stacked else 0)
    if t.dim() != want:
        lead = f"[{g.world}, ...] (the rank first, for a one-GPU group)" if g.stacked else "this rank's tensor"
        raise UsageError(f"{what} must have {want} dimensions, {lead}; got shape {tuple(t.shape)}")
    if g.stacked and t.shape[0] != g.world:
        raise UsageError(f"{what} must carry {g.world} ranks along dimension 0; got shape {tuple(t.shape)}")
    return tuple(t.shape[1:] if g.stacked else t.shape)


def _pad_rows(x: torch.Tensor, rows: int) -> torch.Tensor:
    """``x`` with zero rows appended (along its second-to-last dimension) up to ``rows``."""
    if x.shape[-2] == rows:
        return x
    xp = torch.zeros((*x.shape[:-2], rows, x.shape[-1]), dtype=x.dtype, device=x.device)
    xp[..., : x.shape[-2], :].copy_(x)
    return xp


def _matmul_all_reduce_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    g = resolve_group(group_name)
    what = "matmul_all_reduce"
    xs, ws, rows, k, n = _gemm_operands(x, w, g, what)
    # Each rank owns (reduces and sends) M / world rows in whole 128-row blocks: zero rows pad
    # the tail (their sums are dropped).
    block = g.world * RS_ROW_BLOCK
    padded = math.ceil(rows / block) * block
    if padded != rows:
        xs = _rank_views(_pad_rows(x, padded), g, "x", 2)
    key = KernelKey("gemm-ar", g.world, padded, n, k, DTYPES[x.dtype])
    op = _operator(key, g, what)
    out = _empty(g, padded, n, x)
    op.run([{"A": a, "B": b} for a, b in zip(xs, ws)], _per_rank(out, g))
    return out if padded == rows else out[..., :rows, :].contiguous()


def _all_to_all_matmul(x: torch.Tensor, w: torch.Tensor, group_name: str, keep: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The output, and with ``keep`` a copy of the exchanged ``AllToAll(x)`` the launch left in its buffer
    (row slab q: what rank q sent)."""
    g = resolve_group(group_name)
    what = "all_to_all_matmul"
    rows = _local_shape(x, g, "x", 2)[0]
    if rows % g.world:
        raise UsageError(f"{what}: x's {rows} rows do not split into {g.world} equal slabs, one per rank")
    xs, ws, rows, k, n = _gemm_operands(x, w, g, what)
    key = KernelKey("a2a-gemm", g.world, rows, n, k, DTYPES[x.dtype])
    return _run_moving(_operator(key, g, what), g, xs, ws, x, (rows, n, k), keep)


def _all_to_all_matmul_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_to_all_matmul(x, w, group_name, keep=False)[0]


def _all_to_all_matmul_exchanged_impl(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    out, exchanged = _all_to_all_matmul(x, w, group_name, keep=True)
    assert exchanged is not None
    return out, exchanged


def _attention_shapes(q: torch.Tensor, kv: torch.Tensor, g: Group) -> tuple[int, int, int, int]:
    """``(s, H, Hkv, D)`` of one rank's ``q`` ``[s, H, D]`` and ``kv`` ``[s, 2, Hkv, D]``, checked."""
    what = "sequence_parallel_attention"
    s, heads, d = _local_shape(q, g, "q", 3)
    s2, two, kv_heads, d2 = _local_shape(kv, g, "kv", 4)
    if two != 2 or s2 != s or d2 != d:
        raise UsageError(
            f"{what}: q is [{s}, {heads}, {d}], so kv must be [{s}, 2, kv_heads, {d}] (keys then values); got {[s2, two, kv_heads, d2]}"
        )
    if min(s, heads, kv_heads, d) < 1:
        raise UsageError(f"{what}: q {[s, heads, d]} and kv {[s2, two, kv_heads, d2]} need every size >= 1")
    if heads % kv_heads:
        raise UsageError(f"{what}: {heads} query heads do not share {kv_heads} kv heads evenly (heads must be a multiple of kv_heads)")
    if kv.dtype != q.dtype:
        raise UsageError(f"{what}: q is {q.dtype} but kv is {kv.dtype}")
    return s, heads, kv_heads, d


def _attention_impl(q: torch.Tensor, kv: torch.Tensor, group_name: str, causal: bool) -> torch.Tensor:
    g = resolve_group(group_name)
    s, heads, kv_heads, d = _attention_shapes(q, kv, g)
    qs = [v.view(s, heads * d) for v in _rank_views(q, g, "q", 3)]
    kvs = [v.view(s, 2 * kv_heads * d) for v in _rank_views(kv, g, "kv", 4)]
    key = KernelKey("ag-attention", g.world, g.world * s, heads * d, 2 * kv_heads * d, DTYPES[q.dtype], heads=heads, causal=causal)
    op = _operator(key, g, "sequence_parallel_attention")
    out = torch.empty_like(q)
    op.run([{"Q": a, "KV": b} for a, b in zip(qs, kvs)], [o.view(s, heads * d) for o in _per_rank(out, g)])
    return out


@torch.library.custom_op("ovl::matmul_all_reduce", mutates_args=())
def _mm_ar_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _matmul_all_reduce_impl(x, w, group_name)


@_mm_ar_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], w.shape[-1]))


@torch.library.custom_op("ovl::all_to_all_matmul", mutates_args=())
def _a2a_mm_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return _all_to_all_matmul_impl(x, w, group_name)


@_a2a_mm_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], w.shape[-1]))


@torch.library.custom_op("ovl::all_to_all_matmul_exchanged", mutates_args=())
def _a2a_mm_exchanged_op(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    return _all_to_all_matmul_exchanged_impl(x, w, group_name)


@_a2a_mm_exchanged_op.register_fake
def _(x: torch.Tensor, w: torch.Tensor, group_name: str) -> tuple[torch.Tensor, torch.Tensor]:
    return x.new_empty((*x.shape[:-1], w.shape[-1])), torch.empty_like(x)


@torch.library.custom_op("ovl::sequence_parallel_attention", mutates_args=())
def _sp_attention_op(q: torch.Tensor, kv: torch.Tensor, group_name: str, causal: bool) -> torch.Tensor:
    return _attention_impl(q, kv, group_name, causal)


@_sp_attention_op.register_fake
def _(q: torch.Tensor, kv: torch.Tensor, group_name: str, causal: bool) -> torch.Tensor:
    return torch.empty_like(q)


def matmul_all_reduce(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """``Σ_ranks x @ w`` on every rank (``w`` this rank's slice of the depth); the AllReduce
    overlaps the GEMM. Row counts off whole ``world × 128``-row blocks are padded with zero rows."""
    return torch.ops.ovl.matmul_all_reduce(x, w, resolve_group(group).name)


def all_to_all_matmul(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    """``AllToAll(x) @ w``: slab q of this rank's ``x`` goes to rank q, and row slab q of the result
    is what rank q sent times ``w``; the exchange overlaps the GEMM.

    Where autograd records a gradient for ``w`` it runs ``torch.ops.ovl.all_to_all_matmul_exchanged``, which
    also returns the exchanged ``x`` the kernel already holds (a local copy, ``x``'s size), so the backward's
    ``AllToAll(x)ᵀ @ dy`` exchanges nothing again."""
    name = resolve_group(group).name
    if torch.is_grad_enabled() and w.requires_grad:
        return torch.ops.ovl.all_to_all_matmul_exchanged(x, w, name)[0]
    return torch.ops.ovl.all_to_all_matmul(x, w, name)


def sequence_parallel_attention(q: torch.Tensor, kv: torch.Tensor, group: Any, *, causal: bool = False) -> torch.Tensor:
    """Attention of this rank's queries ``q`` ``[s, H, D]`` over every rank's keys and values
    (``kv`` ``[s, 2, Hkv, D]``, gathered behind the attention); returns ``[s, H, D]``. Scale
    ``1/√D``; ``causal`` masks keys after each query's global position. See the module docstring."""
    if not isinstance(causal, bool):
        raise UsageError(f"sequence_parallel_attention: causal must be True or False, not {causal!r}")
    return torch.ops.ovl.sequence_parallel_attention(q, kv, resolve_group(group).name, causal)


# ---- PyTorch's argument lists ----
def fused_all_gather_matmul(
    A_shard: torch.Tensor, Bs: Sequence[torch.Tensor], gather_dim: int, group_name: str, *, return_A: bool = True
) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
    """``torch.ops.symm_mem.fused_all_gather_matmul``'s arguments and results (``gather_dim`` 0:
    the rows of each rank's tensor, also for a one-GPU group's stacked tensors).

    Each ``B`` is its own overlapped launch. ``A`` (the gathered input), when asked for, is
    gathered with ``torch.distributed`` (or stacked, for a one-GPU group) beside them."""
    g = resolve_group(group_name)
    if gather_dim != 0:
        raise UsageError(f"fused_all_gather_matmul gathers along rows (gather_dim 0), not {gather_dim}")
    outs = [all_gather_matmul(A_shard, b, g) for b in Bs]
    if not return_A:
        return None, outs
    if g.stacked:
        full = A_shard.reshape(-1, A_shard.shape[-1])
        return full.unsqueeze(0).expand(g.world, *full.shape).contiguous(), outs
    import torch.distributed as dist

    full = A_shard.new_empty((g.world * A_shard.shape[0], A_shard.shape[1]))
    dist.all_gather_into_tensor(full, A_shard.contiguous(), group=g.pg)
    return full, outs


def fused_matmul_reduce_scatter(A: torch.Tensor, B: torch.Tensor, reduce_op: str, scatter_dim: int, group_name: str) -> torch.Tensor:
    """``torch.ops.symm_mem.fused_matmul_reduce_scatter``'s arguments (``reduce_op`` "sum", ``scatter_dim`` 0)."""
    if reduce_op != "sum":
        raise UsageError(f"fused_matmul_reduce_scatter reduces with sum, not {reduce_op!r}")
    g = resolve_group(group_name)
    if scatter_dim != 0:
        raise UsageError(f"fused_matmul_reduce_scatter scatters along rows (scatter_dim 0), not {scatter_dim}")
    return matmul_reduce_scatter(A, B, g)


# ---- lifecycle ----
def operators() -> list[BoundOperator]:
    """Every operator bound so far in this process (for inspection and tests)."""
    return [op for op in _operators.values() if not op.closed]


def synchronize(group: Any = None) -> None:
    """Wait for every call so far (of ``group``, or of every group) and raise the first wait that gave up."""
    name = None if group is None else resolve_group(group).name
    for (_key, gname), op in list(_operators.items()):
        if not op.closed and (name is None or gname == name):
            op.check()


def close_all(force: bool = False) -> None:
    """Free every bound operator (refused for one a CUDA graph captured, unless ``force``)."""
    for key, op in list(_operators.items()):
        op.close(force=force)
        del _operators[key]


_autograd.register(
    "ovl::all_gather_matmul",
    "ovl::all_gather_matmul_gathered",
    "ovl::matmul_reduce_scatter",
    "ovl::matmul_all_reduce",
    "ovl::all_to_all_matmul",
    "ovl::all_to_all_matmul_exchanged",
    "ovl::sequence_parallel_attention",
    "ovl::moe_all_gather_grouped_matmul",
)

# ---- operators with modules of their own, offered here with the others ----
# Resolved on first use (those modules build on this one's helpers, so they import it first).
_ELSEWHERE = {"all_gather_matmul_silu_mul": "mlp", "tp_mlp": "mlp", "moe_grouped_matmul_reduce_scatter": "moe_ops"}


def __getattr__(name: str) -> Any:
    if name in _ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(f"{__package__}.{_ELSEWHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
