"""The groups the torch API runs an operator over, by object or by name.

- :class:`OneGpuGroup`: every rank of a world in this process, on one GPU. A tensor passed
  for such a group carries the rank as its leading dimension (``[world, ...]``), so a model
  written for one rank runs all ranks at once when the ops around it broadcast over that
  dimension (matmul, elementwise, norms, attention over a batch). For checking correctness
  on single-GPU machines; its timings are not performance figures.
- :class:`EmulatedGroup`: every rank of a world in this process on the CPU, tensors stacked like a
  one-GPU group's; each operator runs its compiled manifest through the CPU emulation
  (:mod:`ovl_runtime._runner.emulated`). For tests without a GPU: CPU tensors, float32 or bf16.
- :class:`DistGroup`: a ``torch.distributed`` process group, one rank per process (torchrun);
  tensors are this rank's own.

Operators registered with ``torch.library`` take a group by name (``str``), so that
``torch.compile`` can trace them: :func:`resolve_group` turns a name back into its group
(one-GPU groups register themselves under their name; process groups are looked up
through ``torch.distributed``). Imports nothing heavy at module level.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError

__all__ = ["DistGroup", "EmulatedGroup", "Group", "OneGpuGroup", "resolve_group"]

_registry: dict[str, OneGpuGroup | EmulatedGroup] = {}
_dist: dict[str, DistGroup] = {}
_ids = itertools.count()


def _register(g: OneGpuGroup | EmulatedGroup, prefix: str) -> None:
    """Name ``g`` (``<prefix><world>-<n>`` unless named) and register it, so ops find it by name; a name is one group's."""
    if not g.name:
        g.name = f"{prefix}{g.world}-{next(_ids)}"
    if g.name in _registry and _registry[g.name] is not g:
        raise UsageError(f"a group named {g.name!r} exists already")
    _registry[g.name] = g


@dataclass(eq=False)
class OneGpuGroup:
    """``world`` ranks in this process on the current GPU.

    ``reserve``: SMs kept free of waiting programs (default ``max(2, num_sms // 16)``; see
    ``ovl_runtime._runner.sm_budget``). ``name``: how ``torch.library`` ops refer to the group
    (default ``onegpu<world>-<n>``)."""

    world: int
    reserve: int | None = None
    name: str = ""
    kind: str = field(default="one-gpu", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.world, int) or isinstance(self.world, bool) or self.world < 1:
            raise UsageError(f"a one-GPU group needs a positive world size, got {self.world!r}")
        _register(self, "onegpu")

    @property
    def stacked(self) -> bool:
        """Tensors carry every rank, stacked along dimension 0."""
        return True


#: The CPU emulation engines an :class:`EmulatedGroup` runs the manifests with.
EMULATION_ENGINES = ("numpy", "interpret")


@dataclass(eq=False)
class EmulatedGroup:
    """``world`` ranks in this process on the CPU: each operator's compiled manifest (found or compiled as for
    the GPU groups) runs through the CPU emulation on the caller's tensors.

    Tensors carry the rank first (``[world, ...]``), as a :class:`OneGpuGroup`'s, and are CPU tensors, float32
    or bf16: the emulation computes in float32 whatever the kernels' element type. ``engine``: ``numpy`` (the
    kernel templates re-implemented, fast) or ``interpret`` (the emitted Triton source under Triton's
    interpreter; needs the ``interpret`` extra). ``name``: as a one-GPU group's (default ``emulated<world>-<n>``)."""

    world: int
    engine: str = "numpy"
    name: str = ""
    kind: str = field(default="emulated", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.world, int) or isinstance(self.world, bool) or self.world < 1:
            raise UsageError(f"an emulated group needs a positive world size, got {self.world!r}")
        if self.engine not in EMULATION_ENGINES:
            raise UsageError(f"an emulated group runs the engine {' or '.join(EMULATION_ENGINES)}, not {self.engine!r}")
        _register(self, "emulated")

    @property
    def stacked(self) -> bool:
        """Tensors carry every rank, stacked along dimension 0."""
        return True


@dataclass(eq=False)
class DistGroup:
    """A ``torch.distributed`` process group: this process is rank ``rank`` of ``world``."""

    pg: Any
    world: int
    rank: int
    name: str
    kind: str = field(default="dist", init=False)

    @property
    def stacked(self) -> bool:
        return False

    @staticmethod
    def of(pg: Any) -> DistGroup:
        """The group of ``pg`` (made once per process group: a call resolves its group on every call)."""
        g = _dist.get(pg.group_name)
        if g is None or g.pg is not pg:
            import torch.distributed as dist

            g = DistGroup(pg=pg, world=dist.get_world_size(pg), rank=dist.get_rank(pg), name=pg.group_name)
            _dist[pg.group_name] = g
        return g


Group = OneGpuGroup | DistGroup | EmulatedGroup


def resolve_group(group: Any) -> Group:
    """The group ``group`` names: a group object, a one-GPU or emulated group's name, a process group or its name."""
    if isinstance(group, (OneGpuGroup, DistGroup, EmulatedGroup)):
        return group
    if isinstance(group, str):
        if group in _registry:
            return _registry[group]
        if group in _dist:
            return _dist[group]
        try:
            from torch.distributed.distributed_c10d import _resolve_process_group

            return DistGroup.of(_resolve_process_group(group))  # type: ignore[arg-type]  # torch types a group's name as a NewType of str
        except (ImportError, RuntimeError, ValueError, KeyError) as exc:
            raise UsageError(
                f"no group named {group!r}: neither a OneGpuGroup of this process nor a torch.distributed process group"
            ) from exc
    try:
        import torch.distributed as dist

        if isinstance(group, dist.ProcessGroup):
            return DistGroup.of(group)
    except ImportError:
        pass
    raise UsageError(
        f"a group is a OneGpuGroup, an EmulatedGroup, a torch.distributed ProcessGroup or the name of one, not {type(group).__name__}"
    )
