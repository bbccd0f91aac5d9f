"""The ``slab-sum`` kernel executed in numpy (the hierarchical GEMM+ReduceScatter's two reductions).

Per listed m-block ``i`` of ``blocks`` and column tile, as the emitted kernel: for each contribution
``k`` of ``CONTRIB``, the slot ``slot_ptr[k · blocks + i]``; negative, the rank's own rows read in place
from ``own_ptr`` at m-block ``block_ptr[i]``; else a bounded wait on that slot for the launch's target
(one signal per slot per launch), then the staged rows ``part_ptr[(k · blocks + i) · BLOCK_M ..]``. The
fp32 sum is stored at rows ``i · BLOCK_M ..`` of ``out_ptr``, then, with ``done_base >= 0``, slot
``done_base + i`` is release-added 1 (once per tile, as each of the kernel's tiles does).
"""

from __future__ import annotations

import math

import numpy as np

from .._signals.board import epoch_target
from ..errors import KernelFault, ManifestError
from .kernels import KernelContext


def _int_arg(ctx: KernelContext, name: str) -> int:
    v = ctx.value(name)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.{name}", "must be an integer argument")
    return v


def slab_sum(ctx: KernelContext) -> None:
    """out[i] = Σ_k contribution k of listed m-block i (own rows in place, staged rows after their signal)."""
    contrib, bm, bn = ctx.param("CONTRIB"), ctx.param("BLOCK_M"), ctx.param("BLOCK_N")
    n, blocks = ctx.size("N"), ctx.size("blocks")
    done = _int_arg(ctx, "done_base")
    part = ctx.matrix("part_ptr", contrib * blocks * bm, n)
    out = ctx.matrix("out_ptr", blocks * bm, n)
    own_all = ctx.value("own_ptr")
    if not isinstance(own_all, np.ndarray):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.own_ptr", "must be a buffer argument")
    own = own_all.reshape(-1)
    own_blocks = own.size // (bm * n)
    sig = ctx.board("sig_ptr")
    target = epoch_target(ctx.size("epoch_ptr"), 1, sig.bits)
    slots = ctx.table("slot_ptr", contrib * blocks)
    block_of = ctx.table("block_ptr", blocks)
    for i in range(blocks):
        rows = slice(i * bm, (i + 1) * bm)
        for pn in range(math.ceil(n / bn)):
            cols = slice(pn * bn, min(n, (pn + 1) * bn))
            acc = np.zeros((bm, cols.stop - cols.start), dtype=np.float32)
            for k in range(contrib):
                slot = int(slots[k * blocks + i])
                if slot < 0:
                    b = ctx.entry(block_of, "block_ptr", i, 0, own_blocks)
                    acc += own[b * bm * n : (b + 1) * bm * n].reshape(bm, n)[:, cols]
                    continue
                if slot >= sig.num_slots:
                    raise KernelFault(f"rank {ctx.rank}: {ctx.where()} slot_ptr[{k * blocks + i}] = {slot} is outside the signal buffer")
                ctx.wait(sig, slot, target)
                acc += part[(k * blocks + i) * bm : (k * blocks + i + 1) * bm, cols]
            out[rows, cols] = acc
            if done >= 0:
                ctx.notify(sig, done + i)


SLAB_SUM_TEMPLATES = {"slab-sum": slab_sum}
