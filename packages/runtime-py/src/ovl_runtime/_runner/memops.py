"""The copy-engine host ops' copies and signal writes, issued through the CUDA driver.

A launch of a copy-engine operator enqueues its host ops from Python: per delivery a copy and a
stream-written signal, and the waits before them. Through torch, a copy is ``Tensor.copy_`` and a
signal a 4-byte ``copy_`` of the device's epoch word into the slot — on one GPU a same-device copy,
which the driver runs as a kernel. Here a copy is one ``cuMemcpyAsync`` and a signal one
``cuStreamWriteValue32`` of the epoch (a stream memory operation, no SM; the driver fences the write
after the stream's earlier work, as ``__threadfence_system`` would).

The epoch is then a literal of the enqueued op, so a CUDA graph would replay a stale one: while a
stream is being captured the session keeps the torch path, whose signal copies the device's epoch
word, and it stays on that path after a capture (a replay advances the device's word, not the
host's count). ``OVL_HOST_COPIES=torch`` forces the torch path (for comparisons). Imports nothing but ctypes:
GPU only.
"""

from __future__ import annotations

import ctypes
import os


class DriverOps:
    """``cuMemcpyAsync`` and ``cuStreamWriteValue32`` of libcuda, checked."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._copy = lib.cuMemcpyAsync
        self._copy.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        self._copy.restype = ctypes.c_int
        write = getattr(lib, "cuStreamWriteValue32_v2", None) or lib.cuStreamWriteValue32
        write.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        write.restype = ctypes.c_int
        self._write = write

    @staticmethod
    def load() -> DriverOps | None:
        """The driver's ops, or None where the torch path is asked for (``OVL_HOST_COPIES=torch``) or
        libcuda lacks them."""
        if os.environ.get("OVL_HOST_COPIES", "driver").strip().lower() == "torch":
            return None
        try:
            return DriverOps(ctypes.CDLL("libcuda.so.1"))
        except (OSError, AttributeError):
            return None

    def copy(self, stream: int, dst: int, src: int, nbytes: int) -> None:
        """Enqueue a copy of ``nbytes`` from device address ``src`` to ``dst`` (either may be a peer's
        mapped address) on ``stream`` (a ``cudaStream_t`` as an int)."""
        rc = self._copy(dst, src, nbytes, ctypes.c_void_p(stream))
        if rc != 0:
            raise RuntimeError(f"cuMemcpyAsync of {nbytes} bytes {src:#x} -> {dst:#x} failed with CUresult {rc}")

    def write(self, stream: int, addr: int, value: int) -> None:
        """Enqueue the 32-bit write of ``value`` to device address ``addr`` on ``stream``, after the
        stream's earlier work (with the driver's memory barrier)."""
        rc = self._write(ctypes.c_void_p(stream), addr, value & 0xFFFFFFFF, 0)
        if rc != 0:
            raise RuntimeError(f"cuStreamWriteValue32 to {addr:#x} failed with CUresult {rc}")
