"""What a GPU process needs for manifests of the ``nvshmem`` transfer backend (``Manifest.requires_nvshmem``).

- **The symmetric-memory backend.** PyTorch allocates symmetric buffers through NVSHMEM only when
  ``TORCH_SYMMMEM=NVSHMEM`` is set before torch is imported (``symm_mem.set_backend("NVSHMEM")``
  afterwards raised "does not find allocation backend NVSHMEM" on torch 2.11): ``_runner.env``
  sets it, and refuses when torch came first. ``check_nvshmem_session`` checks, once torch is up,
  that the backend really is NVSHMEM, and that NVSHMEM is available in this build.
- **One GPU per process.** NVSHMEM's PEs are processes of distinct GPUs here: with two processes on
  one GPU, NVSHMEM bootstrapped but torch's ``rendezvous`` failed ("Called NVSHMEM API not
  supported with limited MPG runs"). Processes sharing a GPU therefore bootstrap NVSHMEM themselves
  through nvshmem4py (``_runner.nvshmem_select``, ``_runner.nvshmem_direct``); the one-GPU mode (every
  rank in one process) refuses these manifests.
- **No peer views.** Under NVSHMEM, PyTorch's ``get_buffer`` of a peer's view raised "-1 is not a
  valid device", so host copies and peer-pointer tables (the copy-engine and SM backends) are not
  available in an NVSHMEM process: an NVSHMEM session refuses manifests that need them (run those in
  a process of their own on the CUDA backend). NVSHMEM kernels address PEs by number instead.
- **PE numbers.** Torch initialises NVSHMEM over the default process group: PE = global rank, so a
  session's group must be the world.
- **Launching.** The kernel goes through PyTorch's ``requires_nvshmem``: it passes NVSHMEM's device
  bitcode as ``extern_libs`` and initialises NVSHMEM in each compiled module (a post-compile hook).
"""

from __future__ import annotations

import os
from typing import Any

from .._manifest.types import Manifest
from ..errors import UsageError

NVSHMEM_BACKEND = "NVSHMEM"


def peer_view_need(m: Manifest) -> str | None:
    """Why ``m`` reaches peers through peer views (host copies or peer-pointer tables), or None."""
    if any(s.ops for h in m.host_ops for s in h.streams):
        return "its transfers are host copies between peers' buffers (the copy-engine backend)"
    for k in m.kernels:
        for name, a in k.args:
            if a.kind == "peer-pointers":
                return f"kernel {k.name} reads peer pointers ({name}: the SM backend)"
    return None


def check_nvshmem_session(m: Manifest, group: Any) -> bool:
    """Before a session of ``m`` allocates: refuse what this process cannot run under NVSHMEM (see the module).
    Returns whether this process allocates symmetric memory through NVSHMEM (it then has no peer views). PyTorch's
    backend is asked only where NVSHMEM is in play (a manifest that needs it, or ``TORCH_SYMMMEM=NVSHMEM``)."""
    if not m.requires_nvshmem and os.environ.get("TORCH_SYMMMEM") != NVSHMEM_BACKEND:
        return False
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    backend = symm_mem.get_backend(torch.device("cuda"))
    if m.requires_nvshmem:
        if not symm_mem.is_nvshmem_available():
            raise UsageError(f"manifest {m.name} puts through NVSHMEM, and this PyTorch build or system has no NVSHMEM")
        if backend != NVSHMEM_BACKEND:
            raise UsageError(
                f"manifest {m.name} puts through NVSHMEM, but this process allocates symmetric memory through {backend}: "
                "TORCH_SYMMMEM=NVSHMEM must be set before torch is imported (torchrun -m ovl_runtime run sets it)"
            )
        if group is not None and group != dist.group.WORLD:
            raise UsageError(f"manifest {m.name} puts through NVSHMEM, whose PEs are the global ranks: run it on the world group")
    if backend == NVSHMEM_BACKEND:
        why = peer_view_need(m)
        if why is not None:
            raise UsageError(
                f"manifest {m.name} cannot run in an NVSHMEM process: {why}, and PyTorch's NVSHMEM backend gives no peer views; "
                "run it in its own torchrun (the CUDA backend)"
            )
    return backend == NVSHMEM_BACKEND


def nvshmem_launcher(fn: Any, name: str) -> Any:
    """``fn`` (a ``@triton.jit`` kernel) as PyTorch's ``requires_nvshmem`` wraps it: launched with NVSHMEM's device
    library linked and NVSHMEM initialised in its module."""
    from torch.distributed._symmetric_memory._nvshmem_triton import requires_nvshmem

    try:
        return requires_nvshmem(fn)
    except RuntimeError as exc:  # NvshmemLibFinder: no libnvshmem_device.bc
        raise UsageError(f"kernel {name} calls NVSHMEM: {exc} (pip install nvidia-nvshmem-cu13, or set NVSHMEM_LIB_DIR)") from exc
