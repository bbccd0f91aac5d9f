"""Small host-side collectives of the runner (check errors, times, wait errors) on either process-group backend.

NCCL takes CUDA tensors; gloo, the backend when processes share a GPU (``_runner.nvshmem_select``), gathers only CPU
tensors. Both are bounded by the process group's timeout. Imports torch: GPU only.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def collective_device(group: Any = None) -> str:
    """``cpu`` under gloo, else ``cuda``."""
    return "cpu" if dist.get_backend(group) == "gloo" else "cuda"


def gather_rows(row: torch.Tensor, group: Any = None) -> list[torch.Tensor]:
    """Every rank's ``row`` (same shape and dtype on every rank), in rank order, on this backend's device."""
    local = row.to(collective_device(group))
    out = [torch.empty_like(local) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, local, group=group)
    return out


def gather_floats(values: list[float], group: Any = None) -> list[list[float]]:
    """Every rank's ``values`` (as many on every rank), in rank order."""
    rows = gather_rows(torch.tensor(values, dtype=torch.float64), group)
    return [[float(x) for x in r.tolist()] for r in rows]
