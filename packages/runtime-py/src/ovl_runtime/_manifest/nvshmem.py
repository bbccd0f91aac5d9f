"""Checks of the kernels of the ``nvshmem`` transfer backend (``kernels[i].requires: ["nvshmem"]``).

An ``nvshmem-push`` row puts ``length`` elements from ``src_ptr`` to ``dst_ptr`` on PE ``dst_rank``
with a signal add on that PE's 64-bit signal word at int32 slot ``notify_at`` (``ovl_runtime.nvshmem``).
NVSHMEM addresses both by the local symmetric address, so both buffers and the signal buffer are
symmetric; the signal word is the low half at an even slot (8-byte aligned) whose high half is
in the buffer too; every row that moves data signals (a put without a signal completes no wait).
A wrong row would write another PE's memory out of bounds or corrupt a neighbouring slot on the
GPU: here it is a ManifestError naming the rank and row.
"""

from __future__ import annotations

from .._signals.segments import segment_rows
from ..errors import ManifestError
from .types import NVSHMEM, BufferSpec, KernelSpec, Manifest

NVSHMEM_PUSH = "nvshmem-push"


def check_nvshmem(m: Manifest, bufs: dict[str, BufferSpec]) -> None:
    """Every NVSHMEM kernel is declared (``requires``), not precompiled, and its rows stay in range."""
    for i, k in enumerate(m.kernels):
        p = f"kernels[{i}]"
        if k.template_kind == NVSHMEM_PUSH and NVSHMEM not in k.requires:
            raise ManifestError(f"{p}.requires", f"an {NVSHMEM_PUSH} kernel calls NVSHMEM: it must list 'nvshmem'")
        if NVSHMEM in k.requires and k.precompiled is not None:
            raise ManifestError(f"{p}.precompiled", "an NVSHMEM kernel is compiled at run time, with NVSHMEM's device library linked")
        if k.template_kind == NVSHMEM_PUSH:
            _check_push(m, bufs, k, p)


def _buffer_arg(m: Manifest, bufs: dict[str, BufferSpec], k: KernelSpec, name: str, p: str) -> BufferSpec:
    try:
        a = k.arg(name)
    except ManifestError:
        raise ManifestError(f"{p}.args", f"an {NVSHMEM_PUSH} kernel takes {name}") from None
    b = bufs.get(a.name or "") if a.kind == "buffer" else None
    if b is None or not b.symmetric:
        raise ManifestError(
            f"{p}.args.{name}", "must name a symmetric buffer: NVSHMEM addresses the PE's copy by the local symmetric address"
        )
    return b


def _check_push(m: Manifest, bufs: dict[str, BufferSpec], k: KernelSpec, p: str) -> None:
    src, dst = _buffer_arg(m, bufs, k, "src_ptr", p), _buffer_arg(m, bufs, k, "dst_ptr", p)
    if _buffer_arg(m, bufs, k, "sig_ptr", p).name != m.signals.buffer or m.signals.bits != 32:
        raise ManifestError(f"{p}.args.sig_ptr", "must name the signal buffer, of 32-bit slots (a signal word is two of them)")
    seg, count = k.arg("seg_ptr"), k.arg("num_segments")
    if seg.kind != "table" or count.kind != "int" or count.value is None:
        raise ManifestError(f"{p}.args", "seg_ptr must be a table and num_segments an int")
    table = m.table(seg.name or "")
    for rank, flat in enumerate(table.values):
        try:
            rows = segment_rows(NVSHMEM_PUSH, flat, count.value)
        except IndexError as exc:
            raise ManifestError(f"tables.{table.name}", f"rank {rank}: {exc}") from None
        for j, row in enumerate(rows):
            where = f"tables.{table.name} (rank {rank}, segment {j})"
            _check_row(m, row, src, dst, where)


def _check_row(m: Manifest, row: dict[str, int], src: BufferSpec, dst: BufferSpec, where: str) -> None:
    length, notify, wait = row["length"], row["notify_at"], row["wait_at"]
    if length < 0:
        raise ManifestError(where, f"length {length} is negative")
    if length > 0 and notify < 0:
        raise ManifestError(where, f"moves {length} elements but signals no slot; an NVSHMEM put signals its arrival")
    if notify >= 0 and (notify % 2 or notify + 1 >= m.signals.slots):
        raise ManifestError(
            where, f"notify_at {notify} is not the low half of a 64-bit signal word (an even slot below {m.signals.slots - 1})"
        )
    if wait >= m.signals.slots or (wait >= 0 and row["wait_arrivals"] < 1):
        raise ManifestError(where, f"waits on slot {wait} for {row['wait_arrivals']} arrivals, outside the {m.signals.slots} slots")
    if notify < 0:
        return
    if not 0 <= row["dst_rank"] < m.world:
        raise ManifestError(where, f"puts to PE {row['dst_rank']}, outside the world of {m.world}")
    for b, off in ((src, row["src_offset"]), (dst, row["dst_offset"])):
        if off < 0 or off + length > b.numel:
            raise ManifestError(where, f"elements [{off}, {off + length}) are outside buffer {b.name!r} of {b.numel}")
