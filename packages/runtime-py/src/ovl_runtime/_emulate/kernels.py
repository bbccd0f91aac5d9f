"""Kernel templates executed in numpy, tile by tile, exactly as their tables say.

Each template reads its arguments by name (the names the emitter writes), visits tiles in
the persistent grouped order of the Triton kernel, waits before a tile on the slot its
table gives (target = the ``target`` argument) and notifies after a tile. A table entry
that points outside its range is a KernelFault, as an illegal address would be on a GPU.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._manifest.index_maps import IndexMap
from .._manifest.types import KernelSpec
from .._signals.board import SignalBoard, SignalError, SignalTimeout, epoch_target
from ..errors import KernelFault, ManifestError, WaitTimeout
from .stall import Stalled, StallMonitor

WAIT_SLICE_S = 0.02


class Aborted(Exception):
    """Another thread of the launch failed; this one stops without a report of its own."""


@dataclass
class KernelContext:
    """What one rank's launch of one kernel sees: resolved arguments and the wait bound."""

    kernel: KernelSpec
    rank: int
    args: dict[str, Any]
    timeout_s: float
    abort: threading.Event
    monitor: StallMonitor | None = None
    thread: str = ""
    #: The emulated world's symmetric buffers and signal slots, for kernels that address PEs (``_emulate.nvshmem``).
    heap: Any = None

    def where(self) -> str:
        return f"kernel {self.kernel.name} ({self.kernel.template_kind})"

    def value(self, name: str) -> Any:
        if name in self.args:
            return self.args[name]
        raise ManifestError(f"kernel {self.kernel.name}", f"template {self.kernel.template_kind} needs argument {name!r}")

    def param(self, name: str, default: int | None = None) -> int:
        v = self.kernel.template_params.get(name, self.kernel.constexprs.get(name, default))
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ManifestError(f"kernel {self.kernel.name}.template.params.{name}", f"needs a positive integer, got {v!r}")
        return v

    def size(self, name: str) -> int:
        """An integer argument, or the template parameter of that name when no argument is given."""
        if name in self.args:
            v = self.args[name]
            if not isinstance(v, int):
                raise ManifestError(f"kernel {self.kernel.name}.args.{name}", "must be an integer argument")
            return v
        return self.param(name)

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        arr = self.value(name)
        if not isinstance(arr, np.ndarray):
            raise ManifestError(f"kernel {self.kernel.name}.args.{name}", "must be a buffer argument")
        if arr.size < rows * cols:
            raise KernelFault(f"rank {self.rank}: {self.where()} reads {name} as {rows}x{cols}, but the buffer holds {arr.size} elements")
        return arr.reshape(-1)[: rows * cols].reshape(rows, cols)

    def table(self, name: str, length: int) -> np.ndarray:
        t = self.value(name)
        if not isinstance(t, np.ndarray) or t.ndim != 1:
            raise ManifestError(f"kernel {self.kernel.name}.args.{name}", "must be a table argument")
        if t.size < length:
            raise KernelFault(f"rank {self.rank}: {self.where()} table {name} has {t.size} entries, the kernel reads {length}")
        return t

    def map_tables(self, maps: Iterable[IndexMap | None]) -> dict[str, np.ndarray]:
        """This rank's row of every table the dynamic maps among ``maps`` read, by table name."""
        return {n: self.table(n, 1) for n in {m.table for m in maps if m is not None and m.table is not None}}

    def entry(self, table: np.ndarray, name: str, i: int, lo: int, hi: int) -> int:
        v = int(table[i])
        if not lo <= v < hi:
            raise KernelFault(f"rank {self.rank}: {self.where()} table {name}[{i}] = {v} is outside [{lo}, {hi})")
        return v

    def board(self, name: str) -> SignalBoard:
        b = self.value(name)
        if not isinstance(b, SignalBoard):
            raise ManifestError(f"kernel {self.kernel.name}.args.{name}", "must name the signal buffer")
        return b

    def wait(self, board: SignalBoard, slot: int, target: int) -> None:
        """Acquire-wait, bounded; in slices so that a failure elsewhere stops it early."""
        wait_slot(board, slot, target, self.timeout_s, self.abort, self.rank, self.where(), self.monitor, self.thread)

    def notify(self, board: SignalBoard, slot: int, count: int = 1) -> int:
        """Release-add ``count`` to ``slot`` of ``board``; returns the slot's new value."""
        try:
            return board.notify(slot, count)
        except SignalError as exc:
            raise KernelFault(f"rank {self.rank}: {self.where()} notifies {exc}") from exc


def wait_slot(
    board: SignalBoard,
    slot: int,
    target: int,
    timeout_s: float,
    abort: threading.Event,
    rank: int,
    where: str,
    monitor: StallMonitor | None = None,
    thread: str = "",
) -> None:
    """Acquire-wait for ``slot >= target``, in slices: between slices, stop if another
    thread failed, and report a stall (every live thread blocked) without waiting it out.
    The bound ``timeout_s`` runs from the slot's last change, not from the start: a slot that
    is still filling (a full-size GEMM emulated on the CPU notifying tile after tile) is
    progress, and the stall monitor already reports a wait nothing can fill at once."""
    left = timeout_s
    last_seen: int | None = None
    if monitor is not None:
        monitor.enter(thread, board, rank, slot, target, where)
    try:
        while True:
            if abort.is_set():
                raise Aborted()
            step = min(WAIT_SLICE_S, left)
            try:
                board.wait(slot, target, step)
                return
            except SignalTimeout as exc:
                if exc.seen != last_seen:
                    left, last_seen = timeout_s, exc.seen
                left -= step
                if left <= 1e-9:
                    raise WaitTimeout(rank, slot, exc.seen, target, where) from None
            except SignalError as exc:
                raise KernelFault(f"rank {rank}: {where} waits on {exc}") from exc
            stall = monitor.stalled() if monitor is not None else None
            if stall:
                raise Stalled(stall)
    finally:
        if monitor is not None:
            monitor.leave(thread)


def grouped_tiles(num_pid_m: int, num_pid_n: int, group_m: int) -> Iterator[tuple[int, int]]:
    """(visit_m, pid_n) per tile id, Triton's grouped order over the visit index."""
    per_group = group_m * num_pid_n
    for tile_id in range(num_pid_m * num_pid_n):
        first_m = (tile_id // per_group) * group_m
        size_m = min(num_pid_m - first_m, group_m)
        yield first_m + tile_id % size_m, (tile_id % per_group) // size_m


def _wait_target(ctx: KernelContext, bits: int) -> int:
    """A consumer's wait target: the host's ``target`` scalar (the template consumer), or the epoch word ×
    ``WAIT_ARRIVALS`` read on the device (the TLX consumers, ``load_epoch_target``)."""
    if "target" in ctx.args:
        return ctx.size("target")
    return epoch_target(ctx.size("epoch_ptr"), ctx.param("WAIT_ARRIVALS", 1), bits)


def gemm_tile_visits(
    ctx: KernelContext, num_pid_m: int, role: str, order_of: Callable[[int], int], slot_of: Callable[[int], int] | None
) -> None:
    """``C = A @ B`` over the grouped traversal, visit row ``v`` on m-block ``order_of(v)``; with
    ``slot_of``, a ``consumer`` waits on slot ``slot_of(m)`` (target ``target``; -1: none) before the
    tile, a ``producer`` notifies it after (without ``slot_of`` no signal is touched). The order and
    slots come from tables (the template kernels) or a tile program's maps (the TLX kernels)."""
    M, N, K = ctx.size("M"), ctx.size("N"), ctx.size("K")
    BM, BN = ctx.param("BLOCK_M"), ctx.param("BLOCK_N")
    a, b, c = ctx.matrix("a_ptr", M, K), ctx.matrix("b_ptr", K, N), ctx.matrix("c_ptr", M, N)
    sig = None if slot_of is None else ctx.board("sig_ptr")
    target = _wait_target(ctx, sig.bits) if role == "consumer" and sig is not None else 0
    for visit_m, pid_n in grouped_tiles(num_pid_m, math.ceil(N / BN), ctx.param("GROUP_M", 1)):
        pid_m = order_of(visit_m)
        slot = -1 if slot_of is None else slot_of(pid_m)
        if sig is not None and role == "consumer" and slot >= 0:
            ctx.wait(sig, slot, target)
        rows = slice(pid_m * BM, min(M, (pid_m + 1) * BM))
        cols = slice(pid_n * BN, min(N, (pid_n + 1) * BN))
        c[rows, cols] = a[rows, :] @ b[:, cols]
        if sig is not None and role == "producer" and slot >= 0:
            ctx.notify(sig, slot)


def _gemm_tiles(ctx: KernelContext, role: str, slot_table: str) -> None:
    """:func:`gemm_tile_visits` through ``order_ptr`` and the per-m-block slot table ``slot_table``."""
    num_pid_m = math.ceil(ctx.size("M") / ctx.param("BLOCK_M"))
    order = ctx.table("order_ptr", num_pid_m)
    side = ctx.table(slot_table, num_pid_m)
    gemm_tile_visits(ctx, num_pid_m, role, lambda v: ctx.entry(order, "order_ptr", v, 0, num_pid_m), lambda m: int(side[m]))


def ag_gemm_consumer(ctx: KernelContext) -> None:
    """C = A @ B over the gathered A, each m-block waiting on its chunk slot (-1: local)."""
    _gemm_tiles(ctx, "consumer", "slot_ptr")


def gemm_producer(ctx: KernelContext) -> None:
    """C = A @ B stored locally; each finished tile release-adds 1 to its tile-done slot."""
    _gemm_tiles(ctx, "producer", "notify_ptr")


def reduce_slab(ctx: KernelContext, out: np.ndarray, after: Callable[[int, np.ndarray, slice], object] | None = None) -> None:
    """``out`` = this rank's slab summed over ranks, tile by tile (``rs-reduce``'s loop): peer p's rows
    from ``partials[p]`` once slot ``slot_ptr[p × blocks_per_slab + m]`` fills, the rank's own in place
    from ``own_ptr`` (the producer's output), no wait; ``after(mb, rows, cols)`` follows each stored
    tile (its rows and columns of the slab).

    The table lets one signal cover a delivered chunk of several m-blocks; a peer's entry outside
    the signal buffer is a KernelFault, as the kernel's wait would read out of bounds."""
    world, BM, BN = ctx.param("WORLD"), ctx.param("BLOCK_M"), ctx.param("BLOCK_N")
    N, rpr = ctx.size("N"), ctx.size("rows_per_rank")
    if rpr % BM:
        raise ManifestError(f"kernel {ctx.kernel.name}.template.params", f"rows_per_rank {rpr} is not a multiple of BLOCK_M {BM}")
    part = ctx.matrix("part_ptr", world * rpr, N)
    own = ctx.matrix("own_ptr", world * rpr, N)[ctx.rank * rpr : (ctx.rank + 1) * rpr]
    sig = ctx.board("sig_ptr")
    target = epoch_target(ctx.size("epoch_ptr"), 1, sig.bits)
    per_slab = rpr // BM
    slots = ctx.table("slot_ptr", world * per_slab)
    for mb in range(per_slab):
        rows = np.arange(mb * BM, (mb + 1) * BM)
        for pn in range(math.ceil(N / BN)):
            cols = slice(pn * BN, min(N, (pn + 1) * BN))
            acc = np.zeros((BM, cols.stop - cols.start), dtype=np.float32)
            for p in range(world):
                if p == ctx.rank:
                    acc += own[rows, cols]
                    continue
                slot = ctx.entry(slots, "slot_ptr", p * per_slab + mb, 0, sig.num_slots)
                ctx.wait(sig, slot, target)
                acc += part[p * rpr + rows, cols]
            out[rows, cols] = acc
            if after is not None:
                after(mb, rows, cols)


def rs_reduce(ctx: KernelContext) -> None:
    """out[slab] = Σ_p partials[p] (its own partial in place), as :func:`reduce_slab`."""
    reduce_slab(ctx, ctx.matrix("out_ptr", ctx.size("rows_per_rank"), ctx.size("N")))


def reduce_slab_rows(
    ctx: KernelContext, slab_of: Callable[[int], np.ndarray], after: Callable[[np.ndarray, slice], object] | None = None
) -> None:
    """``rs-reduce-rows``'s loop: this rank's slab of m = M / WORLD rows (M the ``ovl_rows`` argument) summed over
    ranks, block by block, into ``slab_of(m)``: peer p's rows from ``partials`` at rows p·m once the arrival slots of
    every chunk the block meets are filled (chunk c of the slab: rows c·cs … with cs = ⌈m / split⌉, slot
    p·split + c), the rank's own in place from ``own_ptr`` (the producer's ``[M, N]`` output), no wait;
    ``after(rows, cols)`` follows each stored tile."""
    world, BM, BN, split = ctx.param("WORLD"), ctx.param("BLOCK_M"), ctx.param("BLOCK_N"), ctx.param("split")
    N, M = ctx.size("N"), ctx.size("ovl_rows")
    if M % world:
        raise ManifestError(f"kernel {ctx.kernel.name}.args.ovl_rows", f"{M} rows do not split over {world} ranks")
    m = M // world
    cs = math.ceil(m / split)
    part = ctx.matrix("part_ptr", M, N)
    own = ctx.matrix("own_ptr", M, N)[ctx.rank * m : (ctx.rank + 1) * m]
    out = slab_of(m)
    sig = ctx.board("sig_ptr")
    target = epoch_target(ctx.size("epoch_ptr"), 1, sig.bits)
    for mb in range(math.ceil(m / BM)):
        rows = np.arange(mb * BM, min((mb + 1) * BM, m))
        for pn in range(math.ceil(N / BN)):
            cols = slice(pn * BN, min(N, (pn + 1) * BN))
            acc = np.zeros((len(rows), cols.stop - cols.start), dtype=np.float32)
            for p in range(world):
                if p == ctx.rank:
                    acc += own[rows, cols]
                    continue
                for c in range(int(rows[0]) // cs, int(rows[-1]) // cs + 1):
                    ctx.wait(sig, p * split + c, target)
                acc += part[p * m + rows, cols]
            out[rows, cols] = acc
            if after is not None:
                after(rows, cols)


def rs_reduce_rows(ctx: KernelContext) -> None:
    """``rs-reduce-rows``: ``out`` ``[m, N]`` = this rank's slab summed over ranks, as :func:`reduce_slab_rows`."""
    reduce_slab_rows(ctx, lambda m: ctx.matrix("out_ptr", m, ctx.size("N")))


GEMM_TEMPLATES: dict[str, Callable[[KernelContext], None]] = {
    "ag-gemm-consumer": ag_gemm_consumer,
    "gemm-producer": gemm_producer,
    "rs-reduce": rs_reduce,
    "rs-reduce-rows": rs_reduce_rows,
}
