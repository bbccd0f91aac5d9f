"""moe-rs's runner kernels in the numpy engine (``moe-slab-expect``, ``moe-slab-notify``, ``moe-topk-sum``,
``moe-permute-rows``, ``moe-topk-reduce-rs``): what the Triton kernels of :mod:`.kernels` compute, on numpy arrays.

This models what the kernels compute, not their code: the interpreter engine runs the source.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..._emulate.kernels import KernelContext
from ..._signals.board import SignalBoard, epoch_target
from ...errors import KernelFault, ManifestError
from ..ag_moe.emulate import flat_arg
from ..ag_moe.routing import slab_cover_reference


def _int_words(arr: np.ndarray, what: str) -> np.ndarray:
    if arr.dtype != np.int32:
        raise ManifestError(what, f"must be an int32 buffer, got {arr.dtype}")
    return arr


def moe_slab_expect(ctx: KernelContext) -> None:
    """``expect[s] += NOTIFIES · cover(s)`` (int32, wrapping; cover 1 for every slab without ``PER_BLOCK``),
    then one add to this rank's READY slot."""
    topk, block_m = ctx.param("TOP_K"), ctx.param("BLOCK_M")
    slots_total, notifies, slab_t, slabs = (ctx.size(x) for x in ("SLOTS", "NOTIFIES", "SLAB_T", "NUM_SLABS"))
    sorted_ids = flat_arg(ctx, "sorted_ids")
    blocks = int(flat_arg(ctx, "num_blocks_ptr")[0])
    expect = _int_words(flat_arg(ctx, "expect_ptr"), f"kernel {ctx.kernel.name}.args.expect_ptr")
    if expect.size < slabs:
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} expect has {expect.size} words, the kernel writes {slabs}")
    per_block = ctx.kernel.constexprs.get("PER_BLOCK", True)
    cover = slab_cover_reference(sorted_ids, blocks, block_m, topk, slab_t, slabs) if per_block else np.ones(slabs, dtype=np.int64)
    if slabs * slab_t * topk != slots_total:
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"SLOTS {slots_total} is not NUM_SLABS·SLAB_T·TOP_K")
    total = (expect[:slabs].astype(np.int64) + cover * notifies) % (1 << 32)
    expect[:slabs] = total.astype(np.uint32).view(np.int32)
    ctx.notify(ctx.board("sig_ptr"), ctx.size("READY_SLOT"))


def moe_slab_notify(ctx: KernelContext) -> None:
    """The launch notify after a warp-specialised producer: 1 to every slab's slot on the slab's owner."""
    per_rank, slabs = ctx.size("SLABS_PER_RANK"), ctx.size("NUM_SLABS")
    boards = ctx.value("sig_ptrs")
    if not isinstance(boards, list) or not all(isinstance(b, SignalBoard) for b in boards):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.sig_ptrs", "must be the signal buffer's peer pointers")
    if slabs != per_rank * len(boards):
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"NUM_SLABS {slabs} is not SLABS_PER_RANK·world")
    for s in range(slabs):
        ctx.notify(boards[s // per_rank], s)


def moe_topk_sum(ctx: KernelContext) -> None:
    """The local TopK-reduce: ``out[t] = Σ_j partial[t·k + j]`` (fp32 sum, stored in out's type)."""
    k = ctx.param("TOP_K")
    T, N = ctx.size("T"), ctx.size("N")
    partial = ctx.matrix("partial_ptr", T * k, N)
    out = ctx.matrix("out_ptr", T, N)
    out[:] = partial.reshape(T, k, N).astype(np.float32).sum(axis=1)


def moe_permute_rows(ctx: KernelContext) -> None:
    """``dst`` in the routing's block order: ``dst[b·BLOCK_M + i] = src[sorted_ids[b·BLOCK_M + i]]`` for the
    valid blocks, zeros at their padding entries."""
    slots_total, K, block_m = ctx.size("SLOTS"), ctx.size("K"), ctx.param("BLOCK_M")
    src = ctx.matrix("src_ptr", slots_total, K)
    sorted_ids = flat_arg(ctx, "sorted_ids")
    blocks = int(flat_arg(ctx, "num_blocks_ptr")[0])
    dst = ctx.matrix("dst_ptr", blocks * block_m, K)
    entries = sorted_ids[: blocks * block_m].astype(np.int64)
    valid = entries < slots_total
    dst[:] = 0
    dst[valid] = src[entries[valid]]


def moe_topk_reduce_rs(ctx: KernelContext) -> None:
    """Wait until this launch's targets are written (READY), then per own slab: wait until it reached its
    target and ``out[t_local] = Σ_ranks Σ_j partial_r[t·k + j]`` for the slab's tokens."""
    k, world = ctx.param("TOP_K"), ctx.param("WORLD")
    N, slab_t, per_rank, ready = (ctx.size(x) for x in ("N", "SLAB_T", "SLABS_PER_RANK", "READY_SLOT"))
    rank = ctx.size("rank")
    parts = ctx.value("partial_ptrs")
    if not isinstance(parts, list) or len(parts) != world:
        raise ManifestError(f"kernel {ctx.kernel.name}.args.partial_ptrs", f"must be the peer pointers of {world} ranks")
    T = per_rank * slab_t * world
    partials = [p.reshape(-1)[: T * k * N].reshape(T, k, N) for p in parts]
    out = ctx.matrix("out_ptr", per_rank * slab_t, N)
    sig = ctx.board("sig_ptr")
    expect = _int_words(flat_arg(ctx, "expect_ptr"), f"kernel {ctx.kernel.name}.args.expect_ptr")
    ctx.wait(sig, ready, epoch_target(ctx.size("epoch_ptr"), 1, sig.bits))
    for ls in range(per_rank):
        s = rank * per_rank + ls
        ctx.wait(sig, s, int(expect[s]) % (1 << sig.bits))
        tokens = slice(s * slab_t, (s + 1) * slab_t)
        acc = np.zeros((slab_t, N), dtype=np.float32)
        for part in partials:
            acc += part[tokens].astype(np.float32).sum(axis=1)
        out[ls * slab_t : (ls + 1) * slab_t] = acc


MOE_RS_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "moe-slab-expect": moe_slab_expect,
    "moe-slab-notify": moe_slab_notify,
    "moe-permute-rows": moe_permute_rows,
    "moe-topk-sum": moe_topk_sum,
    "moe-topk-reduce-rs": moe_topk_reduce_rs,
}
