"""Which NVSHMEM a torchrun process uses for manifests of the ``nvshmem`` transfer backend, decided before torch is imported.

- ``torch``: PyTorch's symmetric memory on its NVSHMEM backend (``TORCH_SYMMMEM=NVSHMEM``, ``symm_mem.empty`` +
  ``rendezvous``; ``_runner.nvshmem``). It needs one GPU per process: with two processes on one GPU, torch's
  ``rendezvous`` calls a team API that NVSHMEM's limited multiple-processes-per-GPU (MPG) mode refuses
  (results/runs/nvshmem-mpg-h200-2026-12-02).
- ``direct``: NVSHMEM bootstrapped by ovl itself through nvshmem4py (``_runner.nvshmem_direct``), which the same
  probe ran with two processes on one GPU; torch's symmetric memory is then left on its CUDA backend.

``OVL_NVSHMEM`` chooses: ``auto`` (the default) is ``direct`` when more processes run on this node than it has
visible GPUs (torchrun's ``LOCAL_WORLD_SIZE`` > the GPUs of ``CUDA_VISIBLE_DEVICES`` or of the driver), else
``torch``; ``direct`` or ``torch`` force one. ``torch`` with processes sharing a GPU is refused (it cannot work).
When processes share a GPU the process group is gloo (NCCL refuses two ranks on one GPU) and local rank ``r``
takes GPU ``r mod gpus``. Imports neither torch nor nvshmem4py.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UsageError

ENV = "OVL_NVSHMEM"
CHOICES = ("auto", "direct", "torch")
PROBE_RUN = "results/runs/nvshmem-mpg-h200-2026-12-02"


@dataclass(frozen=True)
class Placement:
    """Where this node's processes run: ``local_world`` processes over ``gpus`` visible GPUs (None: unknown)."""

    local_world: int
    gpus: int | None

    @property
    def shared(self) -> bool:
        """Whether several processes share a GPU."""
        return self.gpus is not None and self.gpus > 0 and self.local_world > self.gpus

    def device(self, local_rank: int) -> int:
        """The GPU index local rank ``local_rank`` runs on."""
        return local_rank % self.gpus if self.shared and self.gpus else local_rank

    @property
    def process_group_backend(self) -> str:
        """``gloo`` when processes share a GPU (NCCL refuses two ranks on one GPU), else ``nccl``."""
        return "gloo" if self.shared else "nccl"


def visible_gpus(env: Mapping[str, str] | None = None) -> int | None:
    """The GPUs this process can see: the entries of ``CUDA_VISIBLE_DEVICES`` when set (up to the first invalid one,
    as CUDA reads it), else the driver's count (``cuDeviceGetCount``; no context is made). None when neither tells."""
    env = os.environ if env is None else env
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        count = 0
        for entry in listed.split(","):
            entry = entry.strip()
            if not entry or (entry.startswith("-") and entry[1:].isdigit()):
                break  # CUDA ignores the entries from the first invalid one on
            count += 1
        return count
    return _driver_gpus()


def _driver_gpus() -> int | None:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    return count.value


def placement(env: Mapping[str, str] | None = None, gpus: int | None = None) -> Placement:
    """This node's placement from torchrun's ``LOCAL_WORLD_SIZE`` (1 when absent) and the visible GPUs."""
    env = os.environ if env is None else env
    try:
        local_world = max(1, int(env.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError as exc:
        raise UsageError(f"LOCAL_WORLD_SIZE={env.get('LOCAL_WORLD_SIZE')!r} is not a number of processes") from exc
    return Placement(local_world, visible_gpus(env) if gpus is None else gpus)


def nvshmem_heap(needs_nvshmem: bool, where: Placement, requested: str | None = None) -> str | None:
    """``direct``, ``torch``, or None when no manifest puts through NVSHMEM. ``requested``: ``OVL_NVSHMEM``'s value
    (None or empty: ``auto``). A ``UsageError`` for an unknown value, and for ``torch`` with processes sharing a GPU."""
    choice = (requested or "auto").strip().lower()
    if choice not in CHOICES:
        raise UsageError(f"{ENV}={requested!r}: use one of {', '.join(CHOICES)}")
    if not needs_nvshmem:
        return None
    if choice == "torch" and where.shared:
        raise UsageError(
            f"{ENV}=torch, but {where.local_world} processes share {where.gpus} GPU{'s' if where.gpus != 1 else ''}: PyTorch's "
            "NVSHMEM rendezvous calls a team API that NVSHMEM's limited multiple-processes-per-GPU mode refuses "
            f"({PROBE_RUN}); unset {ENV} (or set it to direct) to bootstrap NVSHMEM through nvshmem4py"
        )
    if choice == "auto":
        return "direct" if where.shared else "torch"
    return choice


def heap_from_env(needs_nvshmem: bool, env: Mapping[str, str] | None = None, gpus: int | None = None) -> str | None:
    """:func:`nvshmem_heap` for this process: ``OVL_NVSHMEM`` and the placement read from ``env``."""
    env = os.environ if env is None else env
    if not needs_nvshmem:  # the value is still checked; the GPUs need not be counted
        return nvshmem_heap(False, Placement(1, None), env.get(ENV))
    return nvshmem_heap(needs_nvshmem, placement(env, gpus), env.get(ENV))
