"""Every rank's float32 result of the torch API's four GEMM operators on stacked per-rank inputs (every rank in one
process): what the GPU scripts of the bench check eager calls against. Imports torch.
"""

from __future__ import annotations

from typing import Any


def reference(op: str, x: Any, w: Any) -> Any:
    """The float32 result of ``op`` on stacked ``x`` [W, ...] and ``w`` [W, K, N]."""
    import torch

    xf, wf = x.float(), w.float()
    world = x.shape[0]
    if op == "all_gather_matmul":
        full = xf.reshape(-1, xf.shape[-1])
        return torch.stack([full @ wf[r] for r in range(world)])
    total = sum(xf[q] @ wf[q] for q in range(world))
    if op == "matmul_all_reduce":
        return total.unsqueeze(0).expand(world, *total.shape)
    slab = x.shape[1] // world
    if op == "matmul_reduce_scatter":
        return torch.stack([total[r * slab : (r + 1) * slab] for r in range(world)])
    recv = [torch.cat([xf[q][r * slab : (r + 1) * slab] for q in range(world)]) for r in range(world)]
    return torch.stack([recv[r] @ wf[r] for r in range(world)])
