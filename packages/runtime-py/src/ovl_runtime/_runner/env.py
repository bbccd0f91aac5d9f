"""The process environment every runner process needs before torch is imported.

NVLink multicast can take a shared host's GPUs down, so the runner never lets NCCL,
PyTorch symmetric memory or NVSHMEM use it; the symmetric-memory backend is chosen by
``TORCH_SYMMMEM`` (``CUDA`` by default, the one PyTorch's async-TP ops run with).
"""

from __future__ import annotations

import os

SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
SYMM_BACKENDS = {"cuda": "CUDA", "nvshmem": "NVSHMEM"}


def set_safe_env(symm_backend: str = "cuda") -> None:
    """Set the multicast switches (always) and the symmetric-memory backend."""
    os.environ.update(SAFE_ENV)
    os.environ["TORCH_SYMMMEM"] = SYMM_BACKENDS[symm_backend]
