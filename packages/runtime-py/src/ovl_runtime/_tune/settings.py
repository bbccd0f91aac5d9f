"""Whether and how the torch API tunes compute configurations on the device: off unless asked (``OVL_TUNE=1`` or
``ovl_runtime.ops.tune()``), so nothing changes for a user who does not ask. Pure Python: no torch.

- ``OVL_TUNE``: ``1`` tunes every AllGather+GEMM and GEMM+ReduceScatter shape the torch API binds whose choice
  is not cached yet; ``0`` or unset: the compiler's tuned table decides, as without this module.
- ``OVL_TUNE_TOP_K``: candidates timed per shape, the table's pick included (default 8).
- ``OVL_TUNE_BUDGET_S``: seconds one shape may take (default 180): past it no further candidate is compiled or
  loaded, and the choice is made among those measured (the table's pick is always measured first).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..errors import UsageError


class TuneRefused(UsageError):
    """Tuning cannot run here and now (a CUDA graph is being captured, no GPU, a bad setting)."""

    code = "tune-refused"


@dataclass(frozen=True)
class TuneSettings:
    """``enabled``: tune at bind time; ``top_k``: candidates per shape; ``budget_s``: seconds per shape; ``sweeps``:
    timed sweeps, each launching cuBLAS and every candidate once (``timing.sweeps``); ``min_gain``: how much faster
    than the table's pick another candidate must measure to replace it (noise must not flip a choice)."""

    enabled: bool = False
    top_k: int = 8
    budget_s: float = 180.0
    sweeps: int = 30
    min_gain: float = 0.01

    def __post_init__(self) -> None:
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or not 1 <= self.top_k <= 32:
            raise TuneRefused(f"tuning: top_k must be an integer in 1..32, got {self.top_k!r}")
        if not self.budget_s > 0:
            raise TuneRefused(f"tuning: budget_s must be positive, got {self.budget_s!r}")
        if self.sweeps < 2 or not 0 <= self.min_gain < 1:
            raise TuneRefused("tuning: sweeps must be >= 2 and min_gain in [0, 1)")


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    try:
        return int(v) if v else default
    except ValueError as exc:
        raise TuneRefused(f"{name}={v!r}: an integer") from exc


def _env_float(name: str, default: float) -> float:
    v = os.environ.get(name, "").strip()
    try:
        return float(v) if v else default
    except ValueError as exc:
        raise TuneRefused(f"{name}={v!r}: a number of seconds") from exc


def from_env() -> TuneSettings:
    """The settings the environment asks for."""
    on = os.environ.get("OVL_TUNE", "0").strip().lower() in ("1", "true", "yes", "on")
    return TuneSettings(
        enabled=on, top_k=_env_int("OVL_TUNE_TOP_K", TuneSettings.top_k), budget_s=_env_float("OVL_TUNE_BUDGET_S", TuneSettings.budget_s)
    )


_current: TuneSettings | None = None


def current() -> TuneSettings:
    """The process's settings: what :func:`configure` set, else the environment's (read once)."""
    global _current
    if _current is None:
        _current = from_env()
    return _current


def configure(**changes: object) -> TuneSettings:
    """Change the process's settings (``enabled``, ``top_k``, ``budget_s``, ...); returns the new ones."""
    global _current
    _current = replace(current(), **changes)  # type: ignore[arg-type]  # checked by TuneSettings itself
    return _current


def reset() -> None:
    """Forget what :func:`configure` set: the environment decides again (tests)."""
    global _current
    _current = None
