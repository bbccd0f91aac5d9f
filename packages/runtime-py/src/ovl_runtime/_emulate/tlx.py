"""The TLX kernel kinds (``tlx-gemm``, ``tlx-ag-gemm``, ``tlx-ag-gemm-push``, ``tlx-gemm-rs``) executed in numpy.

They compute what their plain counterparts compute, through the same maps: the warp
specialisation changes who issues a load, not which rows a tile reads or which slot it
waits on. The m-block order and each m-block's slot are the kernel's tile program (maps over
``ovl_m`` and ``ovl_rank``, inline in the source or read from a table), evaluated here. The
push variant adds the communication task of every CTA (TLX §6.2.2, "arrive remote, wait
local"): rows ``pid, pid + programs, …`` of the push table, copied into the peer's symmetric
buffer, then a release-add of 1 on the peer's slot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._manifest.index_maps import TileProgram
from .._manifest.types import NumSms
from ..errors import KernelFault, ManifestError
from .kernels import KernelContext, gemm_tile_visits

# The emitter's PUSH_ROW_FIELDS: one int64 row per piece of a chunk.
PUSH_ROW_FIELDS = ("src_offset", "dst_rank", "dst_offset", "length", "notify_slot")
# The SM count the emulation assumes for a ``num-sms`` grid without a cap (an H100 SXM);
# only the split of push rows over CTAs depends on it, never the result.
EMULATED_SMS = 132


@dataclass(frozen=True)
class PushRow:
    """One row of the push table: ``length`` elements from ``src_offset`` of this rank's
    buffer to ``dst_offset`` of ``dst_rank``'s, then 1 added to ``dst_rank``'s ``notify_slot`` (-1: none)."""

    src_offset: int
    dst_rank: int
    dst_offset: int
    length: int
    notify_slot: int


def push_rows(flat: np.ndarray, num_pushes: int) -> list[PushRow]:
    """Decode the first ``num_pushes`` rows of a flattened push table.

    @raises KernelFault when the table is shorter than ``num_pushes`` rows, as the kernel would read past it.
    """
    width = len(PUSH_ROW_FIELDS)
    if num_pushes < 0 or flat.size < num_pushes * width:
        raise KernelFault(f"push table holds {flat.size // width} rows, the kernel reads {num_pushes}")
    rows = np.asarray(flat[: num_pushes * width], dtype=np.int64).reshape(num_pushes, width)
    return [PushRow(*(int(x) for x in r)) for r in rows]


def cta_rows(num_pushes: int, programs: int, pid: int) -> range:
    """The push rows CTA ``pid`` of ``programs`` takes: ``pid, pid + programs, …`` (the kernel's loop)."""
    return range(pid, num_pushes, programs)


def programs_of(ctx: KernelContext) -> int:
    """The number of CTAs of the kernel's (one-dimensional) persistent grid."""
    g = ctx.kernel.grid[0]
    if isinstance(g, NumSms):
        return g.resolve(EMULATED_SMS)
    return g


def tlx_gemm(ctx: KernelContext) -> None:
    """``C = A @ B`` tile by tile over the persistent grouped traversal; no tables, no waits."""
    gemm_tile_visits(ctx, math.ceil(ctx.size("M") / ctx.param("BLOCK_M")), "gemm", lambda v: v, None)


def _program_tiles(ctx: KernelContext, role: str) -> None:
    """:func:`gemm_tile_visits` through the kernel's tile program: visit row ``v`` on m-block
    ``order(v)``, its slot ``slots[0](m)``, both maps over ``ovl_m`` and ``ovl_rank``."""
    tp = ctx.kernel.tile_program
    if not isinstance(tp, TileProgram) or tp.role != role or len(tp.slots) != 1:
        raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram", f"a TLX {role} needs a {role} tile program with one slot map")
    M, N = ctx.size("M"), ctx.size("N")
    BM, BN = ctx.param("BLOCK_M"), ctx.param("BLOCK_N")
    if (tp.num_pid_m, tp.num_pid_n) != (math.ceil(M / BM), math.ceil(N / BN)):
        raise ManifestError(f"kernel {ctx.kernel.name}.tileProgram", f"a {tp.num_pid_m}x{tp.num_pid_n} grid for a {M}x{N} output")
    tables = ctx.map_tables((tp.order, *tp.slots))

    def order_of(visit_m: int) -> int:
        pid_m = tp.order({"ovl_m": visit_m, "ovl_rank": ctx.rank}, tables)
        if not 0 <= pid_m < tp.num_pid_m:
            raise KernelFault(f"rank {ctx.rank}: {ctx.where()} visit {visit_m} maps to m-block {pid_m}, outside [0, {tp.num_pid_m})")
        return pid_m

    gemm_tile_visits(ctx, tp.num_pid_m, role, order_of, lambda m: tp.slots[0]({"ovl_m": m, "ovl_rank": ctx.rank}, tables))


def tlx_ag_gemm(ctx: KernelContext) -> None:
    """Variant a: the producer waits per chunk on its m-block's slot (target = epoch × 1) before
    the tile's loads; the copies and their stream-written signals are the manifest's host ops."""
    _program_tiles(ctx, "consumer")


def push_task(ctx: KernelContext, pid: int, programs: int) -> None:
    """The communication task of CTA ``pid``: copy each of its rows into the peer, then notify the peer's slot."""
    flat = ctx.value("push_ptr")
    if not isinstance(flat, np.ndarray):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.push_ptr", "must be a table argument")
    rows = push_rows(flat, ctx.size("num_pushes"))
    src = ctx.value("src_ptr")
    peers = ctx.value("dst_ptrs")
    boards = ctx.value("sig_ptrs")
    if not isinstance(src, np.ndarray) or not isinstance(peers, list) or not isinstance(boards, list):
        raise ManifestError(f"kernel {ctx.kernel.name}.args", "src_ptr must be a buffer, dst_ptrs and sig_ptrs peer pointers")
    src_flat = src.reshape(-1)
    for i in cta_rows(len(rows), programs, pid):
        r = rows[i]
        where = f"rank {ctx.rank}: {ctx.where()} push row {i}"
        if not 0 <= r.dst_rank < len(peers):
            raise KernelFault(f"{where} names rank {r.dst_rank}, outside the world of {len(peers)}")
        dst_flat = peers[r.dst_rank].reshape(-1)
        if r.length < 0 or r.src_offset < 0 or r.src_offset + r.length > src_flat.size:
            raise KernelFault(f"{where} reads [{r.src_offset}, {r.src_offset + r.length}) of a {src_flat.size}-element buffer")
        if r.dst_offset < 0 or r.dst_offset + r.length > dst_flat.size:
            raise KernelFault(f"{where} writes [{r.dst_offset}, {r.dst_offset + r.length}) of a {dst_flat.size}-element buffer")
        dst_flat[r.dst_offset : r.dst_offset + r.length] = src_flat[r.src_offset : r.src_offset + r.length]
        if r.notify_slot >= 0:
            ctx.notify(boards[r.dst_rank], r.notify_slot)


def tlx_ag_gemm_push(ctx: KernelContext) -> None:
    """Variant b: every CTA's communication task pushes its rows, then the producers wait locally.

    All pushes precede the tiles here: a push never waits, so this is one of the
    interleavings the co-resident CTAs allow, and every wait is then met by the notifies
    the peers' tasks issue in the same launch (target = epoch × pieces)."""
    programs = programs_of(ctx)
    for pid in range(programs):
        push_task(ctx, pid, programs)
    _program_tiles(ctx, "consumer")


def tlx_gemm_rs(ctx: KernelContext) -> None:
    """The GEMM+RS producer: m-blocks in the sending order, each tile stored, then its m-block's
    slot notified (cooperative and ping-pong consumers store the same tiles)."""
    _program_tiles(ctx, "producer")


TLX_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "tlx-gemm": tlx_gemm,
    "tlx-gemm-rs": tlx_gemm_rs,
    "tlx-ag-gemm": tlx_ag_gemm,
    "tlx-ag-gemm-push": tlx_ag_gemm_push,
}
