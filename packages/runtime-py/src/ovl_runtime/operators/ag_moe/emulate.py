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

from ..._emulate.kernels import KernelContext
from ..._manifest.index_maps import GatherRows, TileProgram
from ..._signals.board import SignalBoard, epoch_target
from ...errors import KernelFault, ManifestError
from .routing import moe_align_reference


def _sizes(ctx: KernelContext) -> tuple[int, int, int, int]:
    return ctx.param("tokens"), ctx.param("topk"), ctx.param("experts"), ctx.param("BLOCK_M")


def flat_arg(ctx: KernelContext, name: str) -> np.ndarray:
    arr = ctx.value(name)
    if not isinstance(arr, np.ndarray):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.{name}", "must be a buffer argument")
    return arr.reshape(-1)


def moe_align_count(ctx: KernelContext) -> None:
    """Each program's per-expert counts of its slice of the slots, into ``counts``."""
    tokens, topk, experts, _ = _sizes(ctx)
    ids = flat_arg(ctx, "topk_ids_ptr")[: tokens * topk]
    counts = flat_arg(ctx, "counts_ptr")
    programs = ctx.param("programs")
    per, width = ctx.size("PER"), counts.size // programs
    for p in range(programs):
        part = ids[p * per : (p + 1) * per]
        counts[p * width : p * width + experts] = np.bincount(part[(part >= 0) & (part < experts)], minlength=experts)[:experts]


def moe_align_scatter(ctx: KernelContext) -> None:
    """``sorted_token_ids``, ``expert_of_block`` and ``num_blocks`` (valid blocks, dropped ids)."""
    tokens, topk, experts, block_m = _sizes(ctx)
    ids = flat_arg(ctx, "topk_ids_ptr")[: tokens * topk].reshape(tokens, topk)
    sorted_ids, expert_of_block, blocks = moe_align_reference(ids, experts, block_m)
    flat_arg(ctx, "sorted_ids_ptr")[: sorted_ids.size] = sorted_ids
    flat_arg(ctx, "expert_of_block_ptr")[: expert_of_block.size] = expert_of_block
    nb = flat_arg(ctx, "num_blocks_ptr")
    nb[0] = blocks
    nb[1] = int(((ids < 0) | (ids >= experts)).sum())


def _buffer_arg(ctx: KernelContext, buffer: str) -> np.ndarray:
    arg = next((n for n, a in ctx.kernel.args if a.kind == "buffer" and a.name == buffer), None)
    if arg is None:
        raise ManifestError(f"kernel {ctx.kernel.name}.args", f"no argument is bound to buffer {buffer!r}")
    return flat_arg(ctx, arg)


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
    tables = ctx.map_tables((tp.order, *tp.slots, g.segment))
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


def _block(sorted_ids: np.ndarray, m: int, g: GatherRows) -> tuple[np.ndarray, np.ndarray]:
    """Block m's entries of the index table and which of them are valid (not padding)."""
    entries = sorted_ids[m * g.block_rows : (m + 1) * g.block_rows]
    return entries, entries < g.limit


def _block_entries(sorted_ids: np.ndarray, m: int, g: GatherRows) -> np.ndarray:
    """The positions within block m of its valid entries (the rows of h in block order)."""
    return np.nonzero(_block(sorted_ids, m, g)[1])[0]


def _block_slots(sorted_ids: np.ndarray, m: int, g: GatherRows) -> np.ndarray:
    entries, valid = _block(sorted_ids, m, g)
    return entries[valid].astype(np.int64)


def moe_producer(ctx: KernelContext) -> None:
    """The moe-rs body (a ``local-producer`` whose tile program gathers rows): for every tile of the
    valid blocks, in the program's order, ``partial[slots, n-cols] = weights[slots] · (h[slots] @ W2[e][:, n-cols])``,
    then one notify per slot column of every segment the block's tokens cover, on the segment's owner."""
    tp = ctx.kernel.tile_program
    if not isinstance(tp, TileProgram) or tp.gather is None or tp.role != "producer":
        raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram", "a moe-rs body needs its producer tile program with gather")
    g = tp.gather
    p = ctx.kernel.template_params
    T, N, K, E, k, BN = (int(p[x]) for x in ("tokens", "N", "K", "experts", "topk", "BLOCK_N"))
    blocks_layout = p.get("aLayout", "slots") == "blocks"
    h_all = _buffer_arg(ctx, str(p["a"]))
    h = h_all.reshape(-1, K) if blocks_layout else h_all[: T * k * K].reshape(T * k, K)
    w = _buffer_arg(ctx, str(p["b"]))[: E * K * N].reshape(E, K, N)
    c = _buffer_arg(ctx, str(p["c"]))[: T * k * N].reshape(T * k, N)
    weights = _buffer_arg(ctx, str(p["weights"]))[: T * k].astype(np.float32)
    sorted_ids = _buffer_arg(ctx, str(p["sortedIds"]))
    expert_of_block = _buffer_arg(ctx, str(p["expertOfBlock"]))
    blocks = int(_buffer_arg(ctx, str(p["numBlocks"]))[0])
    tables = ctx.map_tables((tp.order, *tp.slots, g.segment, tp.owners))
    # A body without per-tile notifies (warp-specialised: its operator notifies once per launch) has no table.
    boards = ctx.value("ovl_sig_ptrs") if tp.slots else []
    if not isinstance(boards, list) or not all(isinstance(b, SignalBoard) for b in boards):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.ovl_sig_ptrs", "must be the signal buffer's peer pointers")
    if not 0 <= blocks <= tp.num_pid_m:
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} reads {blocks} valid blocks, outside [0, {tp.num_pid_m}]")
    tiles = blocks * tp.num_pid_n
    for t in range(tiles):
        t2 = tp.order({"ovl_t": t, "ovl_rank": ctx.rank}, tables)
        if not 0 <= t2 < tiles:
            raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram.order", f"tile {t} maps to {t2}, outside [0, {tiles})")
        m, n = divmod(t2, tp.num_pid_n)
        slots = _block_slots(sorted_ids, m, g)
        e = int(expert_of_block[m])
        if slots.size and not 0 <= e < E:
            raise KernelFault(f"rank {ctx.rank}: {ctx.where()} block {m} reads expert {e} of {E}")
        cols = slice(n * BN, min(N, (n + 1) * BN))
        if slots.size:
            rows = m * g.block_rows + _block_entries(sorted_ids, m, g) if blocks_layout else slots
            acc = h[rows].astype(np.float32) @ w[e][:, cols].astype(np.float32)
            c[slots, cols] = acc * weights[slots][:, None]
            if not tp.slots:
                continue
            first, last = (
                g.segment({"ovl_row": int(r), "ovl_rank": ctx.rank}, tables) for r in (slots.min() // g.divisor, slots.max() // g.divisor)
            )
            for s in range(first, last + 1):
                env = {"ovl_seg": s, "ovl_rank": ctx.rank}
                owner = ctx.rank if tp.owners is None else tp.owners(env, tables)
                if not 0 <= owner < len(boards):
                    raise KernelFault(f"rank {ctx.rank}: {ctx.where()} segment {s} maps to owner {owner}, outside [0, {len(boards)})")
                for col in tp.slots:
                    slot = col(env, tables)
                    if slot >= 0:
                        ctx.notify(boards[owner], slot)


ALIGN_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "moe-align-count": moe_align_count,
    "moe-align-scatter": moe_align_scatter,
}
