"""The ``nvshmem-push`` kernel executed in numpy, on the emulated world's symmetric buffers.

NVSHMEM addresses a peer by PE number and the local symmetric address, so the template reaches
PE ``dst_rank``'s copy of the buffer its ``dst_ptr`` argument names through the world
(``SymmetricHeap``), not through a peer-pointers table. Per row, as the emitted kernel: a bounded
wait on the local slot ``wait_at`` for ``epoch × wait_arrivals``, then, if ``notify_at >= 0``, the
put (the segment copied into the PE's buffer) and the signal add: 1 on the PE's 64-bit signal
word whose low half is slot ``notify_at`` (the count), a carry going to slot ``notify_at + 1``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from .._signals.board import SignalBoard
from ..errors import KernelFault, ManifestError
from .comm import _flat, _rows, _span, _wait
from .kernels import KernelContext


class SymmetricHeap(Protocol):
    """Every rank's copy of the symmetric buffers and signal slots (the emulated NVSHMEM heap)."""

    def symmetric(self, name: str, rank: int) -> np.ndarray:
        """Rank ``rank``'s copy of symmetric buffer ``name``, flat."""
        ...

    def signal_board(self, rank: int) -> SignalBoard:
        """Rank ``rank``'s signal slots."""
        ...


def signal_add(ctx: KernelContext, board: SignalBoard, slot: int) -> None:
    """Add 1 to the 64-bit signal word whose low half is ``slot`` (even) on ``board``: the count in the low
    half, wrapping into the high half ``slot + 1`` as the GPU's 64-bit add does."""
    if slot % 2 or slot + 1 >= board.num_slots:
        raise KernelFault(
            f"rank {ctx.rank}: {ctx.where()} signals slot {slot} of PE {board.rank}, not the low half of a 64-bit word "
            f"inside its {board.num_slots} slots (a misaligned NVSHMEM signal)"
        )
    if ctx.notify(board, slot) == 0:
        ctx.notify(board, slot + 1)


def nvshmem_push(ctx: KernelContext) -> None:
    """Per row: wait on the local slot, then put the segment to PE ``dst_rank`` with a signal add there."""
    heap = ctx.heap
    if heap is None:
        raise ManifestError(f"kernel {ctx.kernel.name}", "an nvshmem-push kernel runs on an emulated world's symmetric heap")
    src = _flat(ctx, "src_ptr")
    dst_name = ctx.kernel.arg("dst_ptr").name or ""
    sig = ctx.board("sig_ptr")
    for row in _rows(ctx):
        _wait(ctx, sig, row)
        if row["notify_at"] < 0:
            continue
        pe = row["dst_rank"]
        try:
            dst, board = heap.symmetric(dst_name, pe), heap.signal_board(pe)
        except IndexError:
            raise KernelFault(f"rank {ctx.rank}: {ctx.where()} puts to PE {pe}, outside the world") from None
        dst[_span(ctx, dst, row["dst_offset"], row["length"], "dst")] = src[_span(ctx, src, row["src_offset"], row["length"], "src")]
        signal_add(ctx, board, row["notify_at"])


NVSHMEM_TEMPLATES = {"nvshmem-push": nvshmem_push}
