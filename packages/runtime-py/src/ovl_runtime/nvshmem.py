"""NVSHMEM device calls of ovl kernels (the ``nvshmem`` transfer backend), as ``@triton.jit`` functions.

Emitted ``nvshmem-push`` kernels import ``put_signal_add`` from here. On the GPU it is NVSHMEM's
block-scoped put with signal (``nvshmemx_putmem_signal_block``): every thread of the program
calls it, the data lands on PE ``pe`` at the symmetric address of ``dst``, then that PE's 64-bit
signal word at ``sig`` is increased by one. The call is resolved at compile time against NVSHMEM's
device bitcode, which the runner links by launching the kernel through PyTorch's
``requires_nvshmem`` (``_runner.nvshmem_launch``); PyTorch also initialises NVSHMEM in the loaded
module. Importable with only ``triton`` installed.

Why ovl declares the extern itself rather than importing PyTorch's device wrapper
(``torch.distributed._symmetric_memory._nvshmem_triton.putmem_signal_block``): PyTorch defines its
wrappers only on a machine with a GPU (``has_triton()``), so an emitted module importing them
would not import for the CPU emulation or for the ahead-of-time compile check. The symbol and
argument types are PyTorch's (a test reads them from PyTorch's source); the signal operation is
NVSHMEM's own constant (``NVSHMEM_SIGNAL_ADD`` = 10 in NVSHMEM 3.x's
``nvshmem_common_transport.h``, which a test reads from the installed wheel where present),
not the 5 that PyTorch 2.11's docstrings give.

**Signal words and ovl's waits.** ``sig`` points at int32 slot ``2s`` of the signal buffer: the
low half of the 64-bit word over slots ``2s`` and ``2s + 1`` (little-endian), so ovl's
``wait_slot`` on slot ``2s`` reads the count, wrap-aware, and a carry into the high half (after
2^32 arrivals) touches only the unused slot ``2s + 1``. The monotone-epoch contract holds: each
arrival adds 1, and a wait for ``epoch × arrivals`` is met once every put of the launch landed.

**Interpreter mode** (``TRITON_INTERPRET=1``, decided as in ``ovl_runtime.language``):
``put_signal_add`` calls the emulated world the interpreter engine installs
(``set_interpreter_world``): it copies the bytes into the PE's copy of the buffer and adds 1 to the
PE's signal word, translating the local symmetric addresses as NVSHMEM does.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

import numpy as np
import triton
import triton.language as tl
from triton.language import core

from .language import INTERPRET

__all__ = ["DEVICE_FUNCTIONS", "NVSHMEM_SIGNAL_ADD", "PUT_SIGNAL_SYMBOL", "EmulatedNvshmem", "put_signal_add", "set_interpreter_world"]

DEVICE_FUNCTIONS = ("put_signal_add",)
#: The NVSHMEM device function ``put_signal_add`` calls (PyTorch's ``putmem_signal_block`` wrapper calls the same).
PUT_SIGNAL_SYMBOL = "nvshmemx_putmem_signal_block"
#: ``nvshmemx_signal_op_t`` ``NVSHMEM_SIGNAL_ADD`` of NVSHMEM 3.x (``device_host_transport/nvshmem_common_transport.h``).
NVSHMEM_SIGNAL_ADD = 10
_SIGNAL_ADD = tl.constexpr(NVSHMEM_SIGNAL_ADD)


class EmulatedNvshmem(Protocol):
    """What the interpreter engine installs: NVSHMEM's put with signal on the emulated ranks' memory."""

    def put_signal_add(self, dst: int, src: int, nbytes: int, sig: int, pe: int) -> None:
        """Copy ``nbytes`` from local address ``src`` to PE ``pe``'s copy of local symmetric address ``dst``,
        then add 1 to the 64-bit signal word of PE ``pe`` at local symmetric address ``sig``."""
        ...


_world_lock = threading.Lock()
_world: list[EmulatedNvshmem] = []


def set_interpreter_world(world: EmulatedNvshmem | None) -> None:
    """Interpreter only: the emulated ranks' memory that ``put_signal_add`` writes (None: none)."""
    with _world_lock:
        _world.clear()
        if world is not None:
            _world.append(world)


def _scalar(x: Any) -> int:
    """An interpreter scalar (a tensor of one element, or a Python int) as an int."""
    handle = getattr(x, "handle", None)
    data = getattr(handle, "data", x)
    return int(np.asarray(data).reshape(-1)[0])


def _host_put_signal_add(dst: Any, src: Any, nelems: Any, sig: Any, pe: Any) -> None:
    with _world_lock:
        world = _world[0] if _world else None
    if world is None:
        raise RuntimeError("put_signal_add ran under the Triton interpreter outside an emulated NVSHMEM world (set_interpreter_world)")
    nbytes = _scalar(nelems) * (dst.dtype.element_ty.primitive_bitwidth // 8)
    world.put_signal_add(_scalar(dst), _scalar(src), nbytes, _scalar(sig), _scalar(pe))


if not INTERPRET:

    @core.extern
    def _putmem_signal_block(dst, src, nbytes, sig, sig_val, sig_op, pe, _semantic=None):
        """``nvshmemx_putmem_signal_block(dst, src, nbytes, sig, sig_val, sig_op, pe)``, resolved in NVSHMEM's bitcode."""
        return core.extern_elementwise(
            "",
            "",
            [dst, src, nbytes, sig, sig_val, sig_op, pe],
            {
                (
                    core.dtype("int64"),
                    core.dtype("int64"),
                    core.dtype("int64"),
                    core.dtype("int64"),
                    core.dtype("uint64"),
                    core.dtype("int32"),
                    core.dtype("int32"),
                ): (PUT_SIGNAL_SYMBOL, core.dtype("int32"))
            },
            is_pure=False,
            _semantic=_semantic,
        )

    @triton.jit
    def put_signal_add(dst, src, nelems, sig, pe):
        """Put ``nelems`` elements from ``src`` to PE ``pe`` at the symmetric address of ``dst``, then add 1 to PE
        ``pe``'s 64-bit signal word at ``sig`` (the low half of an even int32 slot): one block-scoped NVSHMEM call,
        which every thread of the program makes. Returns NVSHMEM's status."""
        nbytes = nelems.to(tl.int64) * (dst.dtype.element_ty.primitive_bitwidth // 8)
        return _putmem_signal_block(
            dst.to(tl.int64),
            src.to(tl.int64),
            nbytes,
            sig.to(tl.int64),
            tl.full([], 1, tl.uint64),
            tl.full([], _SIGNAL_ADD, tl.int32),
            pe.to(tl.int32),
        )

else:

    @triton.jit
    def put_signal_add(dst, src, nelems, sig, pe):
        """Interpreter: the put with signal on the emulated world (``set_interpreter_world``)."""
        _host_put_signal_add(dst, src, nelems, sig, pe)
