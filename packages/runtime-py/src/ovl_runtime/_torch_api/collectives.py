"""The plain collectives the operators' backward passes and the any-row-count operators' plain paths need beside the
overlapped operators: the rows of every rank gathered, their sum scattered by rows or on every rank, and the slab
exchange of AllToAll — over a
``torch.distributed`` group (NCCL) or, for a :class:`~ovl_runtime.groups.OneGpuGroup`, as views (and a sum)
of the stacked ``[world, ...]`` tensors.

- :func:`gather_rows`: ``cat(x over ranks, dim=0)`` on every rank (``[m, k]`` → ``[world·m, k]``; stacked
  ``[W, m, k]`` → ``[W, W·m, k]``, every rank's copy the same view).
- :func:`reduce_scatter_rows`: slab r of the sum of every rank's ``x`` on rank r (``[world·s, ...]`` →
  ``[s, ...]``; stacked ``[W, W·s, ...]`` → ``[W, s, ...]``).
- :func:`all_reduce`: the sum of every rank's ``x`` on every rank (stacked ``[W, ...]`` → ``[W, ...]``, every rank's
  copy the same view).
- :func:`exchange_slabs`: slab q (``rows / world`` rows) of each rank's ``x`` goes to rank q, received in rank
  order — AllToAll+GEMM's exchange, which is its own inverse.
- :func:`on_each_rank`: a per-rank computation over the ranks this process holds (each rank of a stacked group,
  its results stacked; this process's rank otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..groups import Group


def gather_rows(x: torch.Tensor, g: Group) -> torch.Tensor:
    """Every rank's rows of ``x``, in rank order, on every rank."""
    if g.stacked:
        world, rows = x.shape[0], x.shape[1]
        return x.reshape(1, world * rows, *x.shape[2:]).expand(world, world * rows, *x.shape[2:])
    import torch.distributed as dist

    out = x.new_empty((g.world * x.shape[0], *x.shape[1:]))
    dist.all_gather_into_tensor(out, x.contiguous(), group=_pg(g))
    return out


def reduce_scatter_rows(x: torch.Tensor, g: Group) -> torch.Tensor:
    """Slab r (``rows / world`` rows) of the sum over the ranks of their ``x`` ``[rows, ...]``, on rank r."""
    if g.stacked:
        world, rows = x.shape[0], x.shape[1]
        return x.sum(0).reshape(world, rows // world, *x.shape[2:])
    import torch.distributed as dist

    out = x.new_empty((x.shape[0] // g.world, *x.shape[1:]))
    dist.reduce_scatter_tensor(out, x.contiguous(), group=_pg(g))
    return out


def all_reduce(x: torch.Tensor, g: Group) -> torch.Tensor:
    """The sum over the ranks of their ``x``, on every rank (``x`` itself is left as it was)."""
    if g.stacked:
        return x.sum(0, keepdim=True).expand(x.shape)
    import torch.distributed as dist

    out = x.contiguous().clone()
    dist.all_reduce(out, group=_pg(g))
    return out


def exchange_slabs(x: torch.Tensor, g: Group) -> torch.Tensor:
    """Slab q of this rank's rows goes to rank q; slab r of the result came from rank r."""
    if g.stacked:
        world, rows = x.shape[0], x.shape[1]
        slab = rows // world
        return x.reshape(world, world, slab, *x.shape[2:]).transpose(0, 1).reshape(x.shape)
    import torch.distributed as dist

    out = torch.empty_like(x)
    dist.all_to_all_single(out, x.contiguous(), group=_pg(g))
    return out


def on_each_rank(g: Group, fn: Callable[..., tuple[Any, ...]], *tensors: torch.Tensor) -> tuple[Any, ...]:
    """``fn(rank, *its tensors)`` for every rank this process holds. A stacked group's ranks each get their slice
    ``t[r]`` of every tensor and their results are stacked, output by output (an output that is ``None`` stays
    ``None``); otherwise ``fn`` runs once, for this process's rank, on the tensors as they are."""
    if not g.stacked:
        return fn(g.rank, *tensors)  # type: ignore[union-attr]  # a DistGroup
    parts = [fn(r, *(t[r] for t in tensors)) for r in range(g.world)]
    return tuple(None if outs[0] is None else torch.stack(outs) for outs in zip(*parts, strict=True))


def _pg(g: Group) -> Any:
    return g.pg  # type: ignore[union-attr]  # a DistGroup (stacked groups returned above)
