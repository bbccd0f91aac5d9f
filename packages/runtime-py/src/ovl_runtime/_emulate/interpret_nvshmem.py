"""The NVSHMEM world of the interpreter engine: ``ovl_runtime.nvshmem.put_signal_add`` on the ranks' CPU tensors.

Under Triton's interpreter a kernel's pointers are host addresses of the ranks' CPU tensors. NVSHMEM
names the destination by the local symmetric address and a PE; here, as on the GPU's symmetric heap,
the local address is found in the calling rank's copy of a symmetric buffer and the same offset is
taken in PE ``pe``'s copy. The put copies the bytes (``ctypes.memmove``), then adds 1 to the PE's
64-bit signal word (one lock for every signal add, so concurrent puts to one word add up). An
address outside every symmetric buffer, a PE outside the world or a misaligned signal word is a
``KernelFault``, where the GPU would fault or corrupt memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

from .._manifest.types import Manifest
from ..errors import KernelFault


class InterpretedHeap:
    """Every rank's symmetric buffers by base address: ``(name, rank) -> (base, nbytes)``."""

    def __init__(self, m: Manifest, buffers: list[dict[str, Any]]) -> None:
        self.world = m.world
        self.signal_buffer = m.signals.buffer
        self.spans: dict[str, list[tuple[int, int]]] = {
            b.name: [
                (buffers[r][b.name].data_ptr(), buffers[r][b.name].numel() * buffers[r][b.name].element_size()) for r in range(m.world)
            ]
            for b in m.buffers
            if b.symmetric
        }
        self._lock = threading.Lock()

    def _locate(self, addr: int, nbytes: int, what: str) -> tuple[str, int, int]:
        """``(buffer, rank, byte offset)`` of ``[addr, addr + nbytes)`` inside one rank's copy of a symmetric buffer."""
        for name, spans in self.spans.items():
            for rank, (base, size) in enumerate(spans):
                if base <= addr < base + size:
                    if addr + nbytes > base + size:
                        raise KernelFault(
                            f"NVSHMEM put: {what} [{addr - base}, {addr - base + nbytes}) bytes overrun buffer {name!r} of {size}"
                        )
                    return name, rank, addr - base
        raise KernelFault(f"NVSHMEM put: {what} address {addr:#x} is in no symmetric buffer (NVSHMEM reaches only its symmetric heap)")

    def put_signal_add(self, dst: int, src: int, nbytes: int, sig: int, pe: int) -> None:
        """NVSHMEM's put with signal (``ovl_runtime.nvshmem.EmulatedNvshmem``)."""
        if not 0 <= pe < self.world:
            raise KernelFault(f"NVSHMEM put to PE {pe}, outside the world of {self.world}")
        name, _rank, offset = self._locate(dst, nbytes, "destination")
        self._locate(src, nbytes, "source")
        sname, _srank, soffset = self._locate(sig, 8, "signal")
        if sname != self.signal_buffer or soffset % 8:
            raise KernelFault(f"NVSHMEM signal at byte {soffset} of {sname!r}: not an 8-byte word of the signal buffer")
        ctypes.memmove(self.spans[name][pe][0] + offset, src, nbytes)
        word = ctypes.c_uint64.from_address(self.spans[sname][pe][0] + soffset)
        with self._lock:
            word.value = (word.value + 1) % (1 << 64)


@contextlib.contextmanager
def nvshmem_world(heap: InterpretedHeap | None) -> Iterator[None]:
    """``heap`` installed as the world of ``ovl_runtime.nvshmem`` (interpreter mode) for the duration."""
    if heap is None:
        yield
        return
    from .. import nvshmem

    nvshmem.set_interpreter_world(heap)
    try:
        yield
    finally:
        nvshmem.set_interpreter_world(None)
