"""NVSHMEM bootstrapped by ovl itself through nvshmem4py (``OVL_NVSHMEM=direct``, ``_runner.nvshmem_select``).

What torch's symmetric memory cannot do on its NVSHMEM backend, this does: several processes on one GPU
(NVSHMEM's limited multiple-processes-per-GPU mode). The probe of results/runs/nvshmem-mpg-h200-2026-12-02 ran
each piece used here with two processes on one H200: UID bootstrap, symmetric tensors, a Triton kernel calling
ovl's ``put_signal_add`` linked with ``libnvshmem_device.bc`` and its module initialised by ``module_init``.

- **Lazy, optional.** nvshmem4py (``pip install 'ovl-runtime[nvshmem]'``, PyPI ``nvshmem4py-cu13``) is imported
  only here, when a session needs it; missing, it is a ``UsageError`` saying what to install.
- **PEs.** ``init`` over a unique id that rank 0 publishes in the process group's store (``_runner.nvshmem_uid``,
  bounded): PE = global rank, world = the process group's size.
- **What is never called.** In limited MPG, NVSHMEM *ends the process* (exit 255) on an API it does not support,
  host-side signal waits on a stream and team APIs among them. Nothing here calls them: ovl's kernels wait with
  their own bounded spin on the local signal word (``ovl_runtime.language.wait_slot``), and host-side
  synchronisation between ranks goes through the gloo/NCCL process group, bounded by its timeout.
- **Finalize.** ``nvshmem_finalize`` is collective: it runs only after a bounded process-group barrier passed
  (a rank that is gone would otherwise leave the others in NVSHMEM's own unbounded barrier).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from ..errors import DeviceError, UsageError
from .nvshmem_uid import share_uid

INSTALL_HINT = "pip install 'ovl-runtime[nvshmem]' (nvshmem4py-cu13, with the nvidia-nvshmem-cu13 wheel torch installs)"


def import_nvshmem4py() -> tuple[Any, Any]:
    """``(nvshmem.core, cuda.core.Device)``, or a ``UsageError`` naming what to install."""
    try:
        import nvshmem.core as nv
        from cuda.core import Device
    except ImportError as exc:
        raise UsageError(
            f"NVSHMEM used directly (processes sharing a GPU, or OVL_NVSHMEM=direct) needs nvshmem4py, which does not import "
            f"here ({exc}): {INSTALL_HINT}"
        ) from exc
    return nv, Device


def device_bitcode(nv: Any) -> str:
    """The path of ``libnvshmem_device.bc``: ``NVSHMEM_LIB_DIR`` when set, nvshmem4py's finder, else beside the host
    library in the ``nvidia.nvshmem`` wheel's ``lib/``."""
    tried: list[str] = []
    lib_dir = os.environ.get("NVSHMEM_LIB_DIR")
    if lib_dir:
        path = Path(lib_dir) / "libnvshmem_device.bc"
        if path.is_file():
            return str(path)
        tried.append(str(path))
    try:
        found = nv.find_device_bitcode_library()
        if found and Path(str(found)).is_file():
            return str(found)
    except Exception as exc:  # noqa: BLE001 - the wheel ships no headers: look beside the host library
        tried.append(f"nvshmem4py's finder ({exc})")
    try:
        import nvidia.nvshmem as pkg

        for root in pkg.__path__:
            path = Path(root) / "lib" / "libnvshmem_device.bc"
            if path.is_file():
                return str(path)
            tried.append(str(path))
    except ImportError:
        tried.append("the nvidia.nvshmem package (not installed)")
    raise UsageError(f"NVSHMEM's device library libnvshmem_device.bc was not found ({'; '.join(tried)}): set NVSHMEM_LIB_DIR")


class DirectNvshmem:
    """NVSHMEM of this process, initialised once per process group and finalized with it."""

    def __init__(self, nv: Any, rank: int, world: int, bitcode: str) -> None:
        self.nv, self.rank, self.world = nv, rank, world
        self.extern_libs = {"libnvshmem_device": bitcode}
        self.ready_modules: set[int] = set()
        self.lock = threading.Lock()
        self.open = True

    @classmethod
    def start(cls, rank: int, world: int, device: int, store: Any, timeout_s: float) -> DirectNvshmem:
        """Bootstrap NVSHMEM on GPU ``device`` as PE ``rank`` of ``world`` (the unique id through ``store``)."""
        nv, Device = import_nvshmem4py()
        bitcode = device_bitcode(nv)
        dev = Device(device)
        dev.set_current()
        uid = share_uid(store, rank, nv.get_unique_id, lambda: nv.get_unique_id(empty=True), timeout_s)
        try:
            nv.init(device=dev, uid=uid, rank=rank, nranks=world, initializer_method="uid")
        except Exception as exc:  # noqa: BLE001 - NVSHMEM's own errors, named
            raise DeviceError(f"NVSHMEM init (UID bootstrap, PE {rank} of {world}, GPU {device}): {type(exc).__name__}: {exc}") from exc
        pe, npes = int(nv.my_pe()), int(nv.n_pes())
        if (pe, npes) != (rank, world):
            raise DeviceError(f"NVSHMEM init gave PE {pe} of {npes}, but this process is rank {rank} of {world}")
        return cls(nv, rank, world, bitcode)

    def tensor(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A symmetric tensor (collective: every PE allocates the same shapes in the same order)."""
        t = self.nv.tensor(tuple(int(s) for s in shape), dtype=dtype)
        if t is None:  # nvshmem4py returns None when it found no torch at its import
            raise DeviceError("nvshmem4py allocated no tensor: its torch interop is off (torch did not import inside nvshmem4py)")
        return t

    def free(self, t: Any) -> None:
        """Free a symmetric tensor of :meth:`tensor` (collective, like the allocation)."""
        self.nv.free_tensor(t)

    def init_module(self, kernel: Any) -> None:
        """Initialise NVSHMEM in a compiled Triton kernel's module, once per module."""
        kernel._init_handles()
        handle = int(kernel.module)
        with self.lock:
            if handle in self.ready_modules:
                return
            self.nv.module_init(self.nv.NvshmemKernelObject.from_handle(kernel.module))
            self.ready_modules.add(handle)

    def launcher(self, fn: Any, name: str) -> Any:
        """``fn`` (a ``@triton.jit`` kernel that calls NVSHMEM) launched with NVSHMEM's device library linked and its
        module initialised here (``_runner.nvshmem_launch``); ``name`` names it in errors."""
        from .nvshmem_launch import DirectKernel

        return DirectKernel(fn, self, name)

    def finalize(self, peers_alive: bool) -> None:
        """``nvshmem_finalize`` (collective) when ``peers_alive`` (a bounded barrier passed); otherwise nothing: NVSHMEM's
        own barrier would wait for a peer that is gone, and the process's exit releases the memory."""
        if not self.open:
            return
        self.open = False
        if peers_alive:
            self.nv.finalize()
