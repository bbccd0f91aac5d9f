"""What the torch references share: a buffer read as a matrix, a rank's slab, the rows of every rank gathered and a
sum scattered through NCCL (NCCL's gather and scatter need equal shards, so uneven ones are gathered padded to the
largest, and scattered by an all-reduce then a slice), and the relative error. Same conventions as
:mod:`.arrays`."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.distributed as dist

from .._manifest.shards import rank_rows, row_counts
from .._manifest.types import Manifest
from ..errors import ManifestError


def matrix(t: torch.Tensor, rows: tuple[int, ...], cols: int, where: str) -> torch.Tensor:
    for r in rows:
        if t.numel() == r * cols:
            return t.reshape(r, cols)
    raise ManifestError(where, f"buffer of {t.numel()} elements cannot be read as " + " or ".join(f"{r}x{cols}" for r in rows))


def slab(t: torch.Tensor, first: int, rows: int) -> torch.Tensor:
    return t if t.shape[0] == rows else t[first : first + rows]


def shard(m: Manifest, t: torch.Tensor, rank: int, cols: int, where: str) -> torch.Tensor:
    """``rank``'s shard of a row-sharded buffer (its rows, or all M rows), as a matrix."""
    first, rows = rank_rows(m, rank)
    return slab(matrix(t, (m.reference.M, rows), cols, where), first, rows)


def gather_rows(m: Manifest, shard: torch.Tensor) -> torch.Tensor:
    """Every rank's shard (float32) in rank order, all M rows, through NCCL."""
    counts = row_counts(m)
    big = max(counts)
    if all(c == big for c in counts):
        full = torch.empty(sum(counts), shard.shape[1], device=shard.device, dtype=torch.float32)
        dist.all_gather_into_tensor(full, shard.float().contiguous())
        return full
    padded = torch.zeros(big, shard.shape[1], device=shard.device, dtype=torch.float32)
    padded[: shard.shape[0]] = shard.float()
    out = torch.empty(len(counts) * big, shard.shape[1], device=shard.device, dtype=torch.float32)
    dist.all_gather_into_tensor(out, padded)
    return torch.cat([out[r * big : r * big + c] for r, c in enumerate(counts)])


def scatter_rows(m: Manifest, part: torch.Tensor, rank: int) -> torch.Tensor:
    """``rank``'s rows of the sum over ranks of ``part`` [M, cols] (float32), through NCCL."""
    counts = row_counts(m)
    if all(c == counts[0] for c in counts):
        out = torch.empty(counts[rank], part.shape[1], device=part.device, dtype=torch.float32)
        dist.reduce_scatter_tensor(out, part.float().contiguous())
        return out
    total = part.float().contiguous()
    dist.all_reduce(total)
    first, rows = rank_rows(m, rank)
    return total[first : first + rows]


def stacked_shards(m: Manifest, inputs: list[dict[str, torch.Tensor]], key: str, cols: int) -> torch.Tensor:
    """Every rank's shard (float32) of the row-sharded input ``key`` in rank order, all on this device."""
    return torch.cat([shard(m, x[key], r, cols, f"reference.inputs.{key}").float() for r, x in enumerate(inputs)])


def sum_over_ranks(world: int, f: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """``f(0) + f(1) + … + f(world - 1)``."""
    acc = f(0)
    for q in range(1, world):
        acc = acc + f(q)
    return acc


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """‖out − ref‖ / ‖ref‖ in float32; NaN when the output holds NaN/inf."""
    o = out.float()
    if not bool(torch.isfinite(o).all()):
        return math.nan
    norm = float(ref.norm())
    diff = float((o - ref).norm())
    return diff / norm if norm > 0 else diff
