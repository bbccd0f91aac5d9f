"""ag-attention in the numpy engine: the compiled flash-attention body (a ``local-consumer`` whose kv loop waits once
per arrival group, ``ovl_kv_group_*`` tables) under its tables and tile program: per group, a wait on each of its
slots, then each of its visit positions' kv block (the tile program's order) read as it is at that moment; every kv
block must be read exactly once; the rank's output is the attention of its queries over what was read (its causal
mask by global position). Where the kernel reads a block before its rows land, the poison it reads makes the check
fail, as on a GPU.

This models what the body computes, not its code (the causal clipping of each query block's kv loops is the
compiler's check at every length, ``checkAgAttentionRows``, and the interpreter engine's, which runs the source).
"""

from __future__ import annotations

import numpy as np

from ..._emulate.kernels import KernelContext
from ..._manifest.index_maps import TileProgram
from ..._signals.board import epoch_target
from ...errors import KernelFault, ManifestError
from .spec import AttentionSpec, attention

#: The group tables the compiler gives a kv loop (``KV_GROUP_TABLES`` of the emitter's ``kv-groups.ts``).
GROUP_TABLES = ("ovl_kv_group_start", "ovl_kv_group_wait_at", "ovl_kv_group_waits")


def _buffer(ctx: KernelContext, param: str) -> np.ndarray:
    """The flat buffer the template parameter ``param`` names (``q``, ``kv``, ``o``), as bound to an argument."""
    name = str(ctx.kernel.template_params.get(param, ""))
    for arg, a in ctx.kernel.args:
        if a.kind == "buffer" and a.name == name:
            arr = ctx.value(arg)
            if isinstance(arr, np.ndarray):
                return arr.reshape(-1)
    raise ManifestError(f"kernel {ctx.kernel.name}.args", f"no argument is bound to the {param} buffer {name!r}")


def _spec(ctx: KernelContext) -> AttentionSpec:
    p, c = ctx.kernel.template_params, ctx.kernel.constexprs
    scale = c.get("sm_scale")
    if not isinstance(scale, float | int) or isinstance(scale, bool):
        raise ManifestError(
            f"kernel {ctx.kernel.name}.constexprs.sm_scale",
            "the numpy engine models the built-in flash_attention: use the interpret engine",
        )
    return AttentionSpec(ctx.param("heads"), ctx.param("kvHeads"), ctx.param("headDim"), bool(p.get("causal")), float(scale))


def attention_consumer(ctx: KernelContext) -> None:
    """This rank's attention over the kv blocks its groups read, each after its group's waits (module docstring)."""
    tp = ctx.kernel.tile_program
    if not isinstance(tp, TileProgram) or tp.role != "consumer":
        raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram", "a compiled attention body needs its consumer tile program")
    a = _spec(ctx)
    BN = ctx.param("BLOCK_N")
    width, cols = a.heads * a.head_dim, 2 * a.kv_heads * a.head_dim
    q, kv, o = _buffer(ctx, "q"), _buffer(ctx, "kv"), _buffer(ctx, "o")
    s, S = q.size // width, kv.size // cols
    q, kv, o = q[: s * width].reshape(s, width), kv[: S * cols].reshape(S, cols), o[: s * width].reshape(s, width)
    nb = tp.num_pid_m
    starts = ctx.table(GROUP_TABLES[0], 1)
    wait_at = ctx.table(GROUP_TABLES[1], starts.size)
    waits = ctx.table(GROUP_TABLES[2], 1)
    tables = ctx.map_tables((tp.order,))
    sig = ctx.board("ovl_sig_ptr")
    target = epoch_target(ctx.size("ovl_epoch_ptr"), 1, sig.bits)
    read = np.zeros(nb, dtype=bool)
    seen_kv = np.zeros_like(kv)
    for g in range(starts.size - 1):
        for w in range(int(wait_at[g]), int(wait_at[g + 1])):
            ctx.wait(sig, ctx.entry(waits, GROUP_TABLES[2], w, 0, sig.num_slots), target)
        for p in range(int(starts[g]), min(int(starts[g + 1]), nb)):
            b = tp.order({"ovl_m": p, "ovl_rank": ctx.rank}, tables)
            if not 0 <= b < nb or read[b]:
                raise KernelFault(
                    f"rank {ctx.rank}: {ctx.where()} group {g} visits kv block {b} at position {p} (again, or outside [0, {nb}))"
                )
            read[b] = True
            rows = slice(b * BN, min(S, (b + 1) * BN))
            seen_kv[rows] = kv[rows]  # as it is now: rows that have not landed yet are still poison
    if not read.all():
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} never reads kv blocks {np.flatnonzero(~read).tolist()}")
    o[:] = attention(q, seen_kv, a, ctx.rank * s).astype(o.dtype)
