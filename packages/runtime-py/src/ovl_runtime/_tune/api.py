"""The public face of on-device tuning (re-exported by :mod:`ovl_runtime.ops`): turn it on or off for this process,
and read what it chose. Imports torch: GPU only (through the tuner)."""

from __future__ import annotations

from pathlib import Path

from . import settings as _settings
from . import tuner as _tuner
from .cache import TuneRecord, cache_path


def tune(enabled: bool = True, *, top_k: int | None = None, budget_s: float | None = None) -> None:
    """Tune on the device the compute configuration of every AllGather+GEMM and GEMM+ReduceScatter shape this process
    binds from now on (the same as ``OVL_TUNE=1``; ``tune(False)`` turns it off again). The first call of a shape whose
    choice is not cached (:func:`tuned_cache`) lists the compiler's ``top_k`` candidates (default 8), compiles them,
    times each GEMM kernel alone against cuBLAS and binds the fastest: seconds to a few minutes per shape, at most
    ``budget_s`` (default 180) — once per shape and GPU, then the cached choice binds at once. Shapes already bound
    keep their configuration. Never while a CUDA graph is being captured: call each shape once eagerly first."""
    changes: dict[str, object] = {"enabled": bool(enabled)}
    if top_k is not None:
        changes["top_k"] = top_k
    if budget_s is not None:
        changes["budget_s"] = float(budget_s)
    _settings.configure(**changes)


def tuned() -> list[TuneRecord]:
    """What tuning chose in this process, one record per shape: the configuration bound, the table's pick, their
    times and cuBLAS's at the shape, the candidates measured, how long it took (``origin``: ``tuned`` here or read
    from the ``cache``)."""
    return _tuner.records()


def tuned_cache() -> Path:
    """The file tuned choices are cached in (``$OVL_CACHE_DIR/tuned.json`` or ``~/.cache/ovl/tuned.json``)."""
    return cache_path()
