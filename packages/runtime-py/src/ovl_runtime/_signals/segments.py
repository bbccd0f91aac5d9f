"""Segment tables of the SM communication kernels (``sm-push``, ``sm-pull``, ``ring-reduce``) and
of the tile kernels of GEMM+AllReduce (``tile-push``, ``ar-tile-reduce``), and of ``slot-wait`` (slots only).

Each rank's table is a flat int64 list of rows, one row per contiguous segment the kernel
moves; the field order is the emitter's (``@ovl/tlx-emitter`` ``kernels/sm-comm.ts``, ``kernels/tile-comm.ts``).
"""

from __future__ import annotations

from collections.abc import Sequence

SEGMENT_FIELDS: dict[str, tuple[str, ...]] = {
    "sm-push": ("src_offset", "dst_rank", "dst_offset", "length", "wait_at", "wait_arrivals", "notify_at"),
    # The NVSHMEM push (``kernels/nvshmem-comm.ts``): sm-push's rows, each moved by one put with signal.
    "nvshmem-push": ("src_offset", "dst_rank", "dst_offset", "length", "wait_at", "wait_arrivals", "notify_at"),
    "sm-pull": ("src_rank", "src_offset", "dst_offset", "length", "wait_at", "wait_arrivals", "notify_at"),
    "ring-reduce": ("recv_offset", "acc_offset", "length", "wait_at", "wait_arrivals", "fwd_rank", "fwd_offset", "notify_at"),
    "tile-push": ("src_offset", "dst_rank", "dst_offset", "rows", "cols", "wait_at", "wait_arrivals", "notify_at"),
    "ar-tile-reduce": ("own_offset", "part_offset", "out_offset", "rows", "cols", "wait_at", "wait_arrivals", "notify_at"),
    "slot-wait": ("wait_at", "wait_arrivals"),
}


def segment_rows(kind: str, table: Sequence[int], count: int) -> list[dict[str, int]]:
    """The first ``count`` rows of a flat segment table, as field dicts."""
    fields = SEGMENT_FIELDS[kind]
    n = len(fields)
    if count * n > len(table):
        raise IndexError(f"{count} segments of {n} fields need {count * n} entries, the table has {len(table)}")
    return [dict(zip(fields, (int(x) for x in table[i * n : (i + 1) * n]))) for i in range(count)]


def notified_slot(kind: str, row: dict[str, int], rank: int) -> tuple[int, int] | None:
    """The (rank, slot) a segment notifies after its copy, or None."""
    slot = row.get("notify_at", -1)
    if slot < 0:
        return None
    if kind in ("sm-push", "tile-push", "nvshmem-push"):
        return (row["dst_rank"], slot)
    if kind == "ring-reduce" and row["fwd_rank"] >= 0:
        return (row["fwd_rank"], slot)
    return (rank, slot)
