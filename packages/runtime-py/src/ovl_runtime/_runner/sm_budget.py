"""The SM budget of the one-GPU mode: how many programs each rank's kernels get (pure, no torch).

With every rank of a world on one GPU, a kernel that spins on a signal occupies its SMs
until another rank's copy or kernel fills the slot. A same-device ``copy_`` is itself a
kernel (the driver runs it on an SM), so if spinning programs held every SM, the copies they
wait for could never start: a deadlock only the wait bound would end. The rule:

- A kernel *waits* if it takes an ``epoch-target`` or ``epoch-word`` argument or its template kind is one of
  :data:`WAITING_KINDS`. Other kernels (a GEMM producer) never spin: once resident they
  run to completion, so whatever SMs they hold come free again.
- Kernels of one (rank, stream) run one after the other (stream order), so at any moment
  at most one kernel per stream per rank is running. The programs of waiting kernels that
  can run at once are therefore at most ``Σ_ranks Σ_streams max(programs of the stream's
  waiting kernels)``.
- That sum must stay ≤ ``num_sms − reserve`` (``reserve`` ≥ 1, by default
  ``max(2, num_sms // 16)``). A program occupies at most one SM, so the spinning programs
  cover at most ``num_sms − reserve`` SMs whatever the scheduler does: at least ``reserve``
  SMs host only non-waiting work, which finishes, so copy kernels and non-waiting kernels
  always find an SM, and every spinning program can be resident at once (none waits
  behind another spinner for an SM).
- Every rank runs the same kernels, so each rank gets ``(num_sms − reserve) // world``
  programs of waiting work. A stream's fixed-grid waiting kernels take their programs out of
  that; what is left is split evenly over the streams with persistent (``num-sms``) waiting
  kernels, and each such kernel's ``num-sms`` dim becomes that share (divided by its other
  dims, at most its ``cap``, at most ``num_sms − its reserve``). Fewer than one program, or a
  fixed grid that does not fit, is refused before anything launches (``UsageError`` naming
  the kernel).
- Non-waiting kernels resolve ``num-sms`` against the whole device, as under torchrun.
- **Deferred** kernels: where the caller allows it (``can_defer``: the world's waits are all met by
  its host ops — copies and signals, no host waits, no communication kernels), a consumer (a tile
  program of role ``consumer``: it notifies nothing, so nothing waits on it) whose fixed grid does
  not fit is not refused but deferred: the runner launches it after every rank's host ops of the
  launch are done, so each of its waits passes at once and none of its programs spins. Its waits
  and indexing are checked; its overlap is not (the CPU emulation checks that).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .._manifest.types import GridDim, KernelSpec, NumSms
from ..errors import UsageError

#: Template kinds whose kernels spin on signal slots (besides any kernel with an ``epoch-target``).
WAITING_KINDS = frozenset(
    {
        "ag-gemm-consumer",
        "rs-reduce",
        "rs-reduce-rows",
        "slab-sum",
        "sm-push",
        "sm-pull",
        "ring-reduce",
        "tlx-ag-gemm",
        "tlx-ag-gemm-push",
    }
)


def default_reserve(num_sms: int) -> int:
    """SMs kept free of spinning programs: ``max(2, num_sms // 16)``."""
    return max(2, num_sms // 16)


def kernel_waits(k: KernelSpec) -> bool:
    """Whether ``k`` can spin on a signal slot."""
    return k.template_kind in WAITING_KINDS or any(a.kind in ("epoch-target", "epoch-word") for _n, a in k.args)


def _fixed_programs(grid: Sequence[GridDim]) -> int:
    return math.prod(g for g in grid if not isinstance(g, NumSms))


def _whole_device(grid: Sequence[GridDim], num_sms: int) -> tuple[int, ...]:
    return tuple(g.resolve(num_sms) if isinstance(g, NumSms) else g for g in grid)


@dataclass(frozen=True)
class SmBudget:
    """Resolved grids (per kernel of the manifest, the same on every rank) and the rule's numbers."""

    num_sms: int
    world: int
    reserve: int
    per_rank: int  # programs of waiting work one rank may have running at once
    grids: tuple[tuple[int, ...], ...]
    waits: tuple[bool, ...]
    #: Per kernel: launched after every rank's host ops (see the module doc); such a kernel does not spin,
    #: so its ``waits`` is False.
    deferred: tuple[bool, ...] = ()

    def concurrent_waiting_programs(self, streams: Sequence[str]) -> int:
        """``Σ_ranks Σ_streams max(programs of that stream's waiting kernels)``: what must fit."""
        per_stream: dict[str, int] = {}
        for grid, waits, stream in zip(self.grids, self.waits, streams):
            if waits:
                per_stream[stream] = max(per_stream.get(stream, 0), math.prod(grid))
        return self.world * sum(per_stream.values())


def deferrable(k: KernelSpec) -> bool:
    """Whether ``k`` only consumes: a compiled body's tile program of role ``consumer`` (it waits, notifies nothing)."""
    return getattr(k.tile_program, "role", None) == "consumer"


def plan_sm_budget(
    kernels: Sequence[KernelSpec], world: int, num_sms: int, reserve: int | None = None, can_defer: bool = False
) -> SmBudget:
    """Grids for ``world`` ranks of ``kernels`` sharing one GPU of ``num_sms`` SMs (see the module doc).
    ``can_defer``: the world's waits are all met by host ops alone, so a consumer whose fixed grid does
    not fit may be deferred rather than refused.

    @raises UsageError naming the kernel when its waiting programs cannot fit.
    """
    if world < 1 or num_sms < 1:
        raise UsageError(f"an SM budget needs world >= 1 and num_sms >= 1, got world {world}, num_sms {num_sms}")
    res = default_reserve(num_sms) if reserve is None else reserve
    if res < 1:
        raise UsageError(f"the SM reserve must be >= 1 (an SM for copy kernels), got {res}")
    budget = num_sms - res
    per_rank = budget // world
    where = f"{world} ranks on {num_sms} SMs, {res} reserved: {per_rank} programs of waiting kernels per rank"
    deferred = tuple(
        can_defer
        and kernel_waits(k)
        and deferrable(k)
        and not any(isinstance(g, NumSms) for g in k.grid)
        and _fixed_programs(k.grid) > per_rank
        for k in kernels
    )
    # A deferred kernel spins on nothing: it takes no share of the budget.
    waits = tuple(kernel_waits(k) and not late for k, late in zip(kernels, deferred))
    for k, w in zip(kernels, waits):
        if w and not any(isinstance(g, NumSms) for g in k.grid) and _fixed_programs(k.grid) > per_rank:
            raise UsageError(
                f"kernel {k.name} waits on signals with a fixed grid of {_fixed_programs(k.grid)} programs, "
                f"beyond the one-GPU budget ({where}): give it a num-sms grid or run fewer ranks"
            )
    streams = sorted({k.stream for k, w in zip(kernels, waits) if w})
    fixed: dict[str, int] = {}
    persistent: set[str] = set()
    for k, w in zip(kernels, waits):
        if not w:
            continue
        if any(isinstance(g, NumSms) for g in k.grid):
            persistent.add(k.stream)
        else:
            fixed[k.stream] = max(fixed.get(k.stream, 0), _fixed_programs(k.grid))
    left = per_rank - sum(fixed.get(s, 0) for s in streams if s not in persistent)
    if left < 0:
        worst = max((k for k, w in zip(kernels, waits) if w), key=lambda k: _fixed_programs(k.grid))
        raise UsageError(
            f"the fixed-grid waiting kernels ({worst.name} the largest, {_fixed_programs(worst.grid)} programs) "
            f"need {per_rank - left} programs per rank together, beyond the one-GPU budget ({where})"
        )
    share = left // len(persistent) if persistent else 0
    grids: list[tuple[int, ...]] = []
    for k, w in zip(kernels, waits):
        n_dims = sum(isinstance(g, NumSms) for g in k.grid)
        if not w or k.stream not in persistent:
            grids.append(_whole_device(k.grid, num_sms))
            continue
        other = _fixed_programs(k.grid)
        if n_dims == 0:  # a fixed grid beside persistent waiting kernels of its stream
            if other > share:
                raise UsageError(
                    f"kernel {k.name} waits on signals with a fixed grid of {other} programs, "
                    f"beyond its stream's share of {share} ({where})"
                )
            grids.append(tuple(int(g) for g in k.grid if not isinstance(g, NumSms)))
            continue
        each = int((share // other) ** (1.0 / n_dims)) if share >= other else 0
        while (each + 1) ** n_dims * other <= share:
            each += 1
        while each > 0 and each**n_dims * other > share:
            each -= 1
        dims = tuple(min(each, g.resolve(num_sms)) if isinstance(g, NumSms) else g for g in k.grid)
        if min(dims) < 1:
            raise UsageError(
                f"kernel {k.name} waits on signals, but the one-GPU budget leaves it no program ({where}; "
                f"{len(persistent)} stream(s) of persistent waiting kernels share it): run fewer ranks"
            )
        grids.append(dims)
    return SmBudget(num_sms=num_sms, world=world, reserve=res, per_rank=per_rank, grids=tuple(grids), waits=waits, deferred=deferred)
