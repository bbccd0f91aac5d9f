"""What a run produced, in either mode: the checks of each launch, times, failures.

Plain data shared by the GPU runner and the CPU emulation; ``_report/report.py`` turns it into
the ``ovl.report/v1`` JSON document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import RunnerError


@dataclass(frozen=True)
class CheckRecord:
    """One checked launch: the relative error of every rank (NaN = NaN/inf in the output)."""

    run: int
    epoch: int
    rel_errors: tuple[float, ...]
    tolerance: float

    @classmethod
    def of(cls, run: int, epoch: int, errs: list[float], tolerance: float) -> CheckRecord:
        return cls(run, epoch, tuple(errs), tolerance)

    @property
    def ok(self) -> bool:
        return all(not math.isnan(e) and e <= self.tolerance for e in self.rel_errors)

    @property
    def worst_rank(self) -> int:
        def key(r: int) -> float:
            e = self.rel_errors[r]
            return math.inf if math.isnan(e) else e

        return max(range(len(self.rel_errors)), key=key)

    @property
    def max_rel_error(self) -> float | None:
        """The largest error over ranks; None when some rank's output held NaN/inf."""
        if any(math.isnan(e) for e in self.rel_errors):
            return None
        return max(self.rel_errors)

    def describe(self) -> str:
        r = self.worst_rank
        e = self.rel_errors[r]
        if math.isnan(e):
            return (
                f"run {self.run} (epoch {self.epoch}): rank {r}'s output holds NaN/inf: some element was never "
                "written (a tile the visit table skips, or a chunk that never arrived)"
            )
        return f"run {self.run} (epoch {self.epoch}): rank {r} relative error {e:.3e} exceeds the tolerance {self.tolerance:g}"


@dataclass
class Baseline:
    """A measurement beside the overlapped operator (torch GEMM, NCCL collective...)."""

    name: str
    ms: float | None
    error: str | None = None


@dataclass
class RunOutcome:
    mode: str  # "gpu" | "emulate"
    device: str
    backend: str  # symmetric-memory backend: CUDA | NVSHMEM | emulated
    clock: str  # "cuda-events" | "wall"
    checks: list[CheckRecord] = field(default_factory=list)
    times_ms: list[list[float]] = field(default_factory=list)  # per rank, per launch
    baselines: list[Baseline] = field(default_factory=list)
    failures: list[RunnerError] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures and all(c.ok for c in self.checks)

    @property
    def exit_code(self) -> int:
        return self.failures[0].exit_code if self.failures else 0

    def raise_for_failure(self) -> None:
        if self.failures:
            raise self.failures[0]
