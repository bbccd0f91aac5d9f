"""SM communication kernels executed in numpy: ``sm-push``, ``sm-pull``, ``ring-reduce``, and
``slot-wait`` (a launch's last wait, on the device).

Each walks its rank's segment table in row order (one program; on the GPU several
programs stride over the rows), waits before a segment on ``epoch × wait_arrivals``,
moves the segment and notifies after it, exactly as the emitted Triton kernels do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._signals.board import SignalBoard, epoch_target
from .._signals.segments import segment_rows
from ..errors import KernelFault, ManifestError
from .kernels import KernelContext


def _rows(ctx: KernelContext) -> list[dict[str, int]]:
    table = ctx.value("seg_ptr")
    n = ctx.size("num_segments")
    try:
        return segment_rows(ctx.kernel.template_kind, list(table), n)
    except IndexError as exc:
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} seg_ptr: {exc}") from exc


def _flat(ctx: KernelContext, name: str) -> np.ndarray:
    arr = ctx.value(name)
    if not isinstance(arr, np.ndarray):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.{name}", "must be a buffer argument")
    return arr.reshape(-1)


def _peers(ctx: KernelContext, name: str) -> list[Any]:
    v = ctx.value(name)
    if not isinstance(v, list):
        raise ManifestError(f"kernel {ctx.kernel.name}.args.{name}", "must be a peer-pointers argument")
    return v


def _span(ctx: KernelContext, arr: np.ndarray, offset: int, length: int, what: str) -> slice:
    if offset < 0 or length < 0 or offset + length > arr.size:
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} {what} elements [{offset}, {offset + length}) are outside its {arr.size}")
    return slice(offset, offset + length)


def _peer(ctx: KernelContext, items: list[Any], rank: int, what: str) -> Any:
    if not 0 <= rank < len(items):
        raise KernelFault(f"rank {ctx.rank}: {ctx.where()} {what} names rank {rank}, outside the world of {len(items)}")
    return items[rank]


def _wait(ctx: KernelContext, board: SignalBoard, row: dict[str, int]) -> None:
    if row["wait_at"] >= 0:
        ctx.wait(board, row["wait_at"], epoch_target(ctx.size("epoch_ptr"), max(1, row["wait_arrivals"]), board.bits))


def sm_push(ctx: KernelContext) -> None:
    """Copy a local segment into a peer's symmetric buffer, then release-add the peer's slot."""
    src, dsts = _flat(ctx, "src_ptr"), [a.reshape(-1) for a in _peers(ctx, "dst_ptrs")]
    sig, sigs = ctx.board("sig_ptr"), _peers(ctx, "sig_ptrs")
    for row in _rows(ctx):
        _wait(ctx, sig, row)
        dst = _peer(ctx, dsts, row["dst_rank"], "dst_rank")
        dst[_span(ctx, dst, row["dst_offset"], row["length"], "dst")] = src[_span(ctx, src, row["src_offset"], row["length"], "src")]
        if row["notify_at"] >= 0:
            ctx.notify(_peer(ctx, sigs, row["dst_rank"], "dst_rank"), row["notify_at"])


def sm_pull(ctx: KernelContext) -> None:
    """Wait on a peer's slot, copy the peer's segment here, then release-add a local slot."""
    srcs, dst = [a.reshape(-1) for a in _peers(ctx, "src_ptrs")], _flat(ctx, "dst_ptr")
    sig, sigs = ctx.board("sig_ptr"), _peers(ctx, "sig_ptrs")
    for row in _rows(ctx):
        _wait(ctx, _peer(ctx, sigs, row["src_rank"], "src_rank"), row)
        src = _peer(ctx, srcs, row["src_rank"], "src_rank")
        dst[_span(ctx, dst, row["dst_offset"], row["length"], "dst")] = src[_span(ctx, src, row["src_offset"], row["length"], "src")]
        if row["notify_at"] >= 0:
            ctx.notify(sig, row["notify_at"])


def ring_reduce(ctx: KernelContext) -> None:
    """acc += recv (float32) per segment; forward the sum into the next rank's recv and notify it,
    or, on the last step, notify the local slot (the chunk is fully reduced)."""
    recv, acc = _flat(ctx, "recv_ptr"), _flat(ctx, "acc_ptr")
    recvs = [a.reshape(-1) for a in _peers(ctx, "recv_ptrs")]
    sig, sigs = ctx.board("sig_ptr"), _peers(ctx, "sig_ptrs")
    for row in _rows(ctx):
        _wait(ctx, sig, row)
        a = _span(ctx, acc, row["acc_offset"], row["length"], "acc")
        total = acc[a].astype(np.float32) + recv[_span(ctx, recv, row["recv_offset"], row["length"], "recv")].astype(np.float32)
        acc[a] = total
        fwd = row["fwd_rank"]
        if fwd >= 0:
            nxt = _peer(ctx, recvs, fwd, "fwd_rank")
            nxt[_span(ctx, nxt, row["fwd_offset"], row["length"], "fwd")] = total
        if row["notify_at"] >= 0:
            ctx.notify(_peer(ctx, sigs, fwd, "fwd_rank") if fwd >= 0 else sig, row["notify_at"])


def slot_wait(ctx: KernelContext) -> None:
    """Wait on each row's slot for ``epoch × wait_arrivals`` (rows with ``wait_at < 0`` are padding)."""
    sig = ctx.board("sig_ptr")
    for row in _rows(ctx):
        _wait(ctx, sig, row)


COMM_TEMPLATES = {"sm-push": sm_push, "sm-pull": sm_pull, "ring-reduce": ring_reduce, "slot-wait": slot_wait}
