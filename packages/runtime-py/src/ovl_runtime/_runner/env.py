"""The process environment every runner process needs before torch is imported.

NVLink multicast can take a shared host's GPUs down, so the runner never lets NCCL,
PyTorch symmetric memory or NVSHMEM use it; the symmetric-memory backend is chosen by
``TORCH_SYMMMEM`` (``CUDA`` by default, the one PyTorch's async-TP ops run with; ``NVSHMEM`` for
manifests of the ``nvshmem`` transfer backend, ``symm_backend_for``). PyTorch reads it when torch is
imported, so a GPU process selects it first (``select_symm_backend``) and refuses once it is too late.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from .._manifest.types import Manifest
from ..errors import UsageError

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SYMM_BACKENDS = {"cuda": "CUDA", "nvshmem": "NVSHMEM"}
#: ``--symm-backend`` choices: ``auto`` is NVSHMEM when a manifest puts through NVSHMEM, else CUDA.
SYMM_CHOICES = ("auto", *SYMM_BACKENDS)


def set_safe_env(symm_backend: str = "cuda") -> None:
    """Set the multicast switches (always) and the symmetric-memory backend."""
    os.environ.update(SAFE_ENV)
    os.environ["TORCH_SYMMMEM"] = SYMM_BACKENDS[symm_backend]


def symm_backend_for(manifests: Sequence[Manifest], requested: str = "auto") -> str:
    """The backend (``cuda`` or ``nvshmem``) one process runs ``manifests`` with: ``requested``, or for ``auto``
    ``nvshmem`` when any manifest's kernels call NVSHMEM. A manifest that needs NVSHMEM under ``cuda`` is a
    ``UsageError`` naming it."""
    if requested not in SYMM_CHOICES:
        raise UsageError(f"unknown symmetric-memory backend {requested!r}: use one of {', '.join(SYMM_CHOICES)}")
    needing = [m.name for m in manifests if m.requires_nvshmem]
    if requested == "auto":
        return "nvshmem" if needing else "cuda"
    if requested == "cuda" and needing:
        raise UsageError(
            f"{', '.join(needing)} put{'s' if len(needing) == 1 else ''} through NVSHMEM, which the CUDA symmetric-memory "
            "backend does not give: drop --symm-backend cuda (the runner then selects NVSHMEM)"
        )
    return requested


def select_symm_backend(symm_backend: str) -> None:
    """``set_safe_env`` for a process that is about to import torch for the GPU: PyTorch picks its
    symmetric-memory backend from ``TORCH_SYMMMEM`` when torch is imported, so once torch is imported
    with another backend (``CUDA`` when unset) it is too late, and that is a ``UsageError``."""
    want = SYMM_BACKENDS[symm_backend]
    seen = os.environ.get("TORCH_SYMMMEM", "CUDA")
    if "torch" in sys.modules and seen != want:
        raise UsageError(
            f"the symmetric-memory backend must be {want}, but torch was imported in this process with TORCH_SYMMMEM={seen}; "
            f"start a process for it (torchrun -m ovl_runtime run sets TORCH_SYMMMEM={want} before torch), "
            f"or set TORCH_SYMMMEM={want} before importing torch"
        )
    set_safe_env(symm_backend)


def process_backends(
    manifests: Sequence[Manifest], requested: str = "auto", env: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """``(symm_backend, nvshmem_heap)`` of a torchrun process running ``manifests``: the backend PyTorch's symmetric
    memory is set to (``cuda`` / ``nvshmem``, ``TORCH_SYMMMEM``), and which NVSHMEM serves the manifests that put through
    it (``torch``, ``direct`` or None: ``_runner.nvshmem_select``). With ``direct``, PyTorch's symmetric memory stays on
    CUDA: NVSHMEM is ovl's own (nvshmem4py), and PyTorch must not bootstrap a second one."""
    from .nvshmem_select import heap_from_env

    backend = symm_backend_for(manifests, requested)
    heap = heap_from_env(backend == "nvshmem" and any(m.requires_nvshmem for m in manifests), env)
    return ("cuda" if heap == "direct" else backend), heap
