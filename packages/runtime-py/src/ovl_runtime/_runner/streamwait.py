"""Host-side ``rank_wait`` on the copy-engine path: a stream memory wait, no SM needed.

``cuStreamWaitValue32(stream, addr, target, GEQ)`` holds a stream until the 32-bit slot
satisfies ``(int32)(*addr - target) >= 0`` — the wrap-aware comparison of the epoch model.
Unlike a spin kernel it needs no multiprocessor, so it cannot starve behind kernels that
occupy every SM. A wait may name another rank's slot (a pull that forwards what a peer
pulled): the address is then that rank's signal buffer as this process maps it — a peer
address of the symmetric buffer under torchrun (the stream memory op reads it over NVLink
once peer access is enabled, which symmetric memory's rendezvous does), or the other rank's
plain tensor on the one-GPU path. The driver offers no timeout, so :class:`StreamWaits` bounds it from the
host: past the deadline the slot is read, the wait is recorded as timed out, and the slot is
set to its target on a separate stream so the blocked stream drains. Imports torch: GPU only.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass

import torch
from torch._C._distributed_c10d import _SymmetricMemory

from .._signals.board import reached

_CU_STREAM_WAIT_VALUE_GEQ = 0x0


def _driver_wait_fn():
    lib = ctypes.CDLL("libcuda.so.1")
    for symbol in ("cuStreamWaitValue32_v2", "cuStreamWaitValue32"):
        fn = getattr(lib, symbol, None)
        if fn is not None:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            fn.restype = ctypes.c_int
            return fn
    raise RuntimeError("libcuda has no cuStreamWaitValue32: host-side waits need a CUDA 11.7+ driver")


@dataclass
class PendingWait:
    slot: int
    target: int
    rank: int


class StreamWaits:
    """Enqueues stream waits on slots of this rank's signal buffer, or of a peer's through
    ``peers`` (each rank's signal buffer as a uint32 view this process can address), and
    bounds them."""

    def __init__(
        self, sig_u32: torch.Tensor, rank: int, rescue: torch.cuda.Stream | None = None, peers: list[torch.Tensor | None] | None = None
    ) -> None:
        self.sig = sig_u32
        self.rank = rank
        self.peers = peers
        self._wait = _driver_wait_fn()
        # The stream that reads and releases blocked slots: it must not share a hardware
        # queue with a blocked stream (``rescue``: one the caller made for that).
        self._rescue = rescue if rescue is not None else torch.cuda.Stream()
        self.pending: list[PendingWait] = []
        self.timeouts: list[tuple[int, int, int, int]] = []

    def signals_of(self, rank: int) -> torch.Tensor:
        """The uint32 signal view of ``rank`` (this rank's own, or a peer's mapped view)."""
        if rank == self.rank:
            return self.sig
        view = None if self.peers is None or not 0 <= rank < len(self.peers) else self.peers[rank]
        if view is None:
            raise RuntimeError(
                f"rank {self.rank}: a host wait names rank {rank}'s slot, but no view of that rank's signal buffer was given"
            )
        return view

    def enqueue(self, stream: torch.cuda.Stream, slot: int, target: int, rank: int | None = None) -> None:
        """Stream ``stream`` waits until ``slot`` of ``rank``'s signals (default this rank's)
        reaches ``target`` (uint32, wrap-aware)."""
        on = self.rank if rank is None else rank
        sig = self.signals_of(on)
        target &= 0xFFFFFFFF
        addr = sig.data_ptr() + slot * sig.element_size()
        rc = self._wait(ctypes.c_void_p(stream.cuda_stream), addr, target, _CU_STREAM_WAIT_VALUE_GEQ)
        if rc != 0:
            raise RuntimeError(f"rank {self.rank}: cuStreamWaitValue32 on rank {on}'s slot {slot} failed with CUresult {rc}")
        self.pending.append(PendingWait(slot, target, on))

    def sync(self, timeout_s: float) -> None:
        """Waits for all work of this device, releasing host waits still blocked after ``timeout_s``."""
        sync_bounded([self], timeout_s)

    def release(self) -> None:
        """Record every pending wait whose slot is short of its target, and set the slot to the
        target (on a side stream) so that the blocked stream drains."""
        with torch.cuda.stream(self._rescue):
            for w in self.pending:
                sig = self.signals_of(w.rank)
                seen = int(sig[w.slot].item())
                if not reached(seen, w.target, 32):
                    self.timeouts.append((w.rank, w.slot, seen, w.target))
                    _SymmetricMemory.stream_write_value32(sig, w.slot, w.target)
            self._rescue.synchronize()


def sync_bounded(waits: list[StreamWaits], timeout_s: float) -> None:
    """Waits for all work of this device (every stream joined into the current one), releasing
    the host waits of every ``StreamWaits`` still blocked after ``timeout_s``. With several
    ranks in one process (one GPU), each rank's waits are one ``StreamWaits``."""
    done = torch.cuda.Event()
    done.record(torch.cuda.current_stream())
    deadline = time.monotonic() + timeout_s
    while not done.query():
        if time.monotonic() > deadline:
            for w in waits:
                w.release()
            break
        time.sleep(1e-4)
    torch.cuda.synchronize()
    for w in waits:
        w.pending.clear()
