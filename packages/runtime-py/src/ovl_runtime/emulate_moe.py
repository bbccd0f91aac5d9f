"""ag-moe in the numpy engine: the routing kernels (``moe-align-count`` / ``moe-align-scatter``)
as their numpy reference, and the compiled MoE body (a ``local-consumer`` whose tile program
gathers rows through ``sorted_token_ids``) under its tile program, evaluated from the manifest's
index maps as the source prints them: per valid block, the first and last row its entries name,
a wait on every slot of every segment between them, then ``C[slots] = X[slots // k] @ W[expert]``.

This models what the kernels compute, not their code: the interpreter engine runs the source.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .emulate_kernels import KernelContext
from .errors import KernelFault, ManifestError
from .index_maps import TileProgram
from .moe import moe_align_reference
from .signals import epoch_target


def _sizes(ctx: KernelContext) -> tuple[int, int, int, int]:
    return ctx.param("tokens"), ctx.param("topk"), ctx.param("experts"), ctx.param("BLOCK_M")


def _flat(ctx: KernelContext, name: str) -> np.ndarray:
    arr = ctx.value(name)
    if not isinstance(arr, np.ndarray):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.{name}", "must be a buffer argument")
    return arr.reshape(-1)


def moe_align_count(ctx: KernelContext) -> None:
    """Each program's per-expert counts of its slice of the slots, into ``counts``."""
    tokens, topk, experts, _ = _sizes(ctx)
    ids = _flat(ctx, "topk_ids_ptr")[: tokens * topk]
    counts = _flat(ctx, "counts_ptr")
    programs = ctx.param("programs")
    per, width = ctx.size("PER"), counts.size // programs
    for p in range(programs):
        part = ids[p * per : (p + 1) * per]
        counts[p * width : p * width + experts] = np.bincount(part[(part >= 0) & (part < experts)], minlength=experts)[:experts]


def moe_align_scatter(ctx: KernelContext) -> None:
    """``sorted_token_ids``, ``expert_of_block`` and ``num_blocks`` (valid blocks, dropped ids)."""
    tokens, topk, experts, block_m = _sizes(ctx)
    ids = _flat(ctx, "topk_ids_ptr")[: tokens * topk].reshape(tokens, topk)
    sorted_ids, expert_of_block, blocks = moe_align_reference(ids, experts, block_m)
    _flat(ctx, "sorted_ids_ptr")[: sorted_ids.size] = sorted_ids
    _flat(ctx, "expert_of_block_ptr")[: expert_of_block.size] = expert_of_block
    nb = _flat(ctx, "num_blocks_ptr")
    nb[0] = blocks
    nb[1] = int(((ids < 0) | (ids >= experts)).sum())


def _buffer_arg(ctx: KernelContext, buffer: str) -> np.ndarray:
    arg = next((n for n, a in ctx.kernel.args if a.kind == "buffer" and a.name == buffer), None)
    if arg is None:
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"no argument is bound to buffer {buffer!r}")
    return _flat(ctx, arg)


def moe_consumer(ctx: KernelContext) -> None:
    """The MoE body: every valid block, in the program's order, waits on the segments of its rows."""
    tp = ctx.kernel.tile_program
    if not isinstance(tp, TileProgram) or tp.gather is None:
        raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram", "an ag-moe body needs its tile program with gather")
    g = tp.gather
    p = ctx.kernel.template_params
    T, N, K, E, k = (int(p[x]) for x in ("M", "N", "K", "experts", "topk"))
    x = _buffer_arg(ctx, str(p["a"]))[: T * K].reshape(T, K)
    w = _buffer_arg(ctx, str(p["b"]))[: E * K * N].reshape(E, K, N)
    c = _buffer_arg(ctx, str(p["c"]))[: T * k * N].reshape(T * k, N)
    sorted_ids = _buffer_arg(ctx, str(p["sortedIds"]))
    expert_of_block = _buffer_arg(ctx, str(p["expertOfBlock"]))
    blocks = int(_buffer_arg(ctx, str(p["numBlocks"]))[0])
    names = {mp.table for mp in (tp.order, *tp.slots, g.segment) if mp.table is not None}
    tables = {n: ctx.table(n, 1) for n in names}
    sig = ctx.board("ovl_sig_ptr")
    target = epoch_target(ctx.size("ovl_epoch_ptr"), 1, sig.bits)
    if not 0 <= blocks <= tp.num_pid_m:
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} reads {blocks} valid blocks, outside [0, {tp.num_pid_m}]")
    for v in range(blocks):
        m = tp.order({"ovl_m": v, "ovl_rank": ctx.rank}, tables)
        entries = sorted_ids[m * g.block_rows : (m + 1) * g.block_rows]
        slots = entries[entries < g.limit].astype(np.int64)
        if slots.size > 0:
            seg = [
                g.segment({"ovl_row": int(r), "ovl_rank": ctx.rank}, tables) for r in (slots.min() // g.divisor, slots.max() // g.divisor)
            ]
            for s in range(seg[0], seg[1] + 1):
                for col in tp.slots:
                    slot = col({"ovl_seg": s, "ovl_rank": ctx.rank}, tables)
                    if slot >= 0:
                        ctx.wait(sig, slot, target)
        e = int(expert_of_block[m])
        if not 0 <= e < E:
            raise KernelFault(f"rank {ctx.rank}: {ctx.where()} block {m} reads expert {e} of {E}")
        c[slots] = x[slots // k] @ w[e]


MOE_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "moe-align-count": moe_align_count,
    "moe-align-scatter": moe_align_scatter,
}
