"""The plain collectives a parallel model needs beside ovl's overlapped operators, with their gradients, for both
kinds of group.

A stacked group (one-GPU, emulated) holds every rank in this process: a rank-sharded tensor carries the rank
first (``[world, ...]``) and a replicated one is a single tensor without it, which broadcasts against the stacked
weights (autograd then sums its gradient over the ranks, as an AllReduce would). Under torchrun each process holds
its rank's tensors, and the gradients of replicated values go through the collectives below (Megatron's f and g).

- :func:`gather_rows`: every rank's rows on every rank (backward: the sum of the ranks' gradients, scattered).
- :func:`reduce_scatter_rows`: rank r's rows of the sum of every rank's tensor (backward: the gather).
- :func:`gather_columns`: the vocabulary slices of the logits side by side (backward: this rank's slice).
- :func:`replicated_in`: a replicated activation entering column-parallel GEMMs (backward: AllReduce).
- :func:`reduce_out`: the sum of the ranks' partial results, replicated (backward: identity).
- :func:`collapse`: a stacked tensor whose copies are equal (an AllReduce's result) as one replicated tensor.
"""

from __future__ import annotations

from typing import Any

import torch

from .._torch_api import collectives as coll
from ..groups import DistGroup, Group


def _pg(g: Group) -> Any:
    assert isinstance(g, DistGroup)
    return g.pg


def _all_reduce(x: torch.Tensor, g: Group) -> torch.Tensor:
    import torch.distributed as dist

    out = x.contiguous().clone()
    dist.all_reduce(out, group=_pg(g))
    return out


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, g: Group) -> torch.Tensor:
        ctx.g = g
        return coll.gather_rows(x.contiguous(), g)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return coll.reduce_scatter_rows(dy.contiguous(), ctx.g), None


class _ReduceScatterRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, g: Group) -> torch.Tensor:
        ctx.g = g
        return coll.reduce_scatter_rows(x.contiguous(), g)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return coll.gather_rows(dy.contiguous(), ctx.g), None


class _GatherColumns(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, g: Group) -> torch.Tensor:
        import torch.distributed as dist

        assert isinstance(g, DistGroup)
        ctx.rank, ctx.cols = g.rank, y.shape[-1]
        parts = [torch.empty_like(y) for _ in range(g.world)]
        dist.all_gather(parts, y.contiguous(), group=g.pg)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return dy[..., ctx.rank * ctx.cols : (ctx.rank + 1) * ctx.cols].contiguous(), None


class _ReplicatedIn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, g: Group) -> torch.Tensor:
        ctx.g = g
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, dx: torch.Tensor) -> tuple[Any, ...]:
        return _all_reduce(dx, ctx.g), None


class _ReduceOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, y: torch.Tensor, g: Group) -> torch.Tensor:
        return _all_reduce(y, g)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return dy, None


class _Collapse(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, y: torch.Tensor) -> torch.Tensor:
        ctx.world = y.shape[0]
        return y[0].clone()

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> torch.Tensor:
        # Every rank's copy of the AllReduce's result gets the gradient, as each process's copy does under torchrun.
        return dy.unsqueeze(0).expand(ctx.world, *dy.shape).contiguous()


def gather_rows(x: torch.Tensor, g: Group) -> torch.Tensor:
    """``[*lead, r, ...]`` → ``[*lead, world·r, ...]``: every rank's rows in rank order, on every rank."""
    if g.stacked:
        return coll.gather_rows(x, g).contiguous()
    return _GatherRows.apply(x, g)


def reduce_scatter_rows(x: torch.Tensor, g: Group) -> torch.Tensor:
    """``[*lead, world·r, ...]`` partial sums → ``[*lead, r, ...]``: rank r's rows of the sum over the ranks."""
    if g.stacked:
        return coll.reduce_scatter_rows(x, g)
    return _ReduceScatterRows.apply(x, g)


def gather_columns(y: torch.Tensor, g: Group) -> torch.Tensor:
    """Each rank's ``[..., n]`` column slice side by side: ``[..., world·n]``, replicated (one tensor, no rank
    dimension, for a stacked group)."""
    if g.stacked:
        return torch.cat(y.unbind(0), dim=-1)
    return _GatherColumns.apply(y, g)


def replicated_in(x: torch.Tensor, g: Group) -> torch.Tensor:
    """A replicated activation about to meet this rank's column slice of a weight (identity forward)."""
    return x if g.stacked else _ReplicatedIn.apply(x, g)


def reduce_out(y: torch.Tensor, g: Group) -> torch.Tensor:
    """The sum over the ranks of their partial ``y``, replicated (a stacked group's result has no rank dimension)."""
    return y.sum(0) if g.stacked else _ReduceOut.apply(y, g)


def collapse(y: torch.Tensor, g: Group) -> torch.Tensor:
    """A replicated result an operator returned on every rank (equal copies) as one replicated tensor."""
    return _Collapse.apply(y) if g.stacked else y
