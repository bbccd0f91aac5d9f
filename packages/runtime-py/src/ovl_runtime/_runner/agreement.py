"""Under torchrun every rank must call an operator with the same shapes, or its collectives would wait on each
other forever: the first call of a shape checks it (a host collective, once per operator and shape)."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ..groups import DistGroup, Group


def same_everywhere(g: Group, signature: tuple[Any, ...], what: str) -> None:
    """Under torchrun: every rank passes the same shapes (checked once per operator, before it is built)."""
    if not isinstance(g, DistGroup):
        return
    import torch.distributed as dist

    seen: list[Any] = [None] * g.world
    dist.all_gather_object(seen, signature, group=g.pg)
    differ = [r for r, s in enumerate(seen) if s != signature]
    if differ:
        raise UsageError(f"{what}: ranks pass different shapes: " + "; ".join(f"rank {r}: {s}" for r, s in enumerate(seen)))
