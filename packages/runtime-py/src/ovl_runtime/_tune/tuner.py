"""Tuning one key on the device: the compiler's candidates (:mod:`.candidates`) compiled, each GEMM kernel timed
alone against cuBLAS (:mod:`.timing`), the fastest kept (:mod:`.select`) and cached on disk (:mod:`.cache`), so the
next process binds it at once.

The torch API asks :func:`tuned_key` for the key to bind before it binds an operator (``_torch_api.registry``); with
tuning off (the default) that is the key itself and nothing else runs. Tuning never runs while a CUDA graph is
being captured (``TuneRefused``), and is bounded: ``budget_s`` per shape (listing and compiling the candidates,
then loading them; the table's pick is always measured). A shape that cannot be tuned (no compiler and no
prepared candidates, a compile that fails, no candidate correct) binds the table's pick, as without tuning, with a
warning. Under torchrun every rank measures on its own GPU and the ranks agree on every step (the slowest rank's
time of each candidate decides), so all of them bind the same configuration. What was chosen is logged at INFO
(logger ``ovl_runtime``) and kept as a :class:`~.cache.TuneRecord` (:func:`records`). Imports torch: GPU only.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
import subprocess
import time
from typing import Any

import torch

from .._kernels.compute_config import CONFIG_OPERATORS
from .._kernels.library import KernelKey, KernelNotCompiled, check_manifest, compiler, find
from .._manifest.parse import instantiate, load_manifest
from .._manifest.types import Manifest
from ..errors import RunnerError
from ..groups import DistGroup, Group
from . import settings as _settings
from .cache import CandidateTime, TuneRecord, entry_key, read_cache, write_record
from .candidates import Candidate, prepare_candidates
from .select import choose, relative
from .settings import TuneRefused, TuneSettings
from .timing import REL_TOLERANCE, BufferPool, ComputeKernel, Cublas, sweeps

log = logging.getLogger("ovl_runtime")

#: The key bound for each shape this process tuned or found cached, and the records, by cache entry.
_bound: dict[str, KernelKey] = {}
_records: dict[str, TuneRecord] = {}


def records() -> list[TuneRecord]:
    """What tuning chose in this process, one record per shape (tuned here, or read from the cache)."""
    return list(_records.values())


def forget() -> None:
    """Forget this process's choices (the on-disk cache stays): the next bind looks them up again (tests)."""
    _bound.clear()
    _records.clear()


def tunable(key: KernelKey) -> bool:
    return key.op in CONFIG_OPERATORS and key.config is None


def refuse_capture(what: str) -> None:
    """@raises TuneRefused while the current stream is being captured into a CUDA graph."""
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise TuneRefused(
            f"{what}: tuning compiles and times kernels, which a CUDA graph capture cannot do: call the operator "
            "once before capturing (its first call tunes it)"
        )


def tuned_key(key: KernelKey, group: Group | None = None, settings: TuneSettings | None = None) -> KernelKey:
    """The key the torch API binds for ``key``: itself unless tuning is on and ``key`` is tunable; else the
    configuration tuned (or cached) for its shape on this GPU. @raises TuneRefused during a CUDA graph capture."""
    s = settings or _settings.current()
    if not s.enabled or not tunable(key):
        return key
    refuse_capture(key.dirname)
    if not torch.cuda.is_available():
        raise TuneRefused(f"{key.dirname}: tuning times kernels on a CUDA device, and none is visible")
    gpu = torch.cuda.get_device_name()
    entry = entry_key(key, gpu)
    hit = _bound.get(entry)
    if hit is not None:
        return hit
    cached = read_cache().get(entry)
    usable = cached if cached is not None and _bindable(cached, key) else None
    # Under torchrun every rank binds the cached choice, or none does (then all of them tune together).
    if _agreed(group, None if usable is None else (usable.chosen.label, usable.table_chosen)) and usable is not None:
        chosen = key if usable.table_chosen else dataclasses.replace(key, config=usable.chosen)
        log.info(
            "ovl tune: %s: %s (cached %s: %.3f of cuBLAS; the table's pick %s)",
            key.dirname,
            usable.chosen.label,
            usable.when,
            usable.ratio,
            _ratio(usable.table_ratio),
        )
        return _keep(entry, chosen, usable)
    try:
        rec = _tune(key, group, s, gpu, entry)
    except (TuneRefused, RunnerError) as exc:
        log.warning("ovl tune: %s: not tuned (%s); binding the table's pick", key.dirname, exc)
        return _keep(entry, key, None)
    chosen = key if rec.table_chosen else dataclasses.replace(key, config=rec.chosen)
    try:
        path: object = write_record(rec)
    except OSError as exc:  # a read-only cache: the choice holds for this process, the next one tunes again
        log.warning("ovl tune: %s: the choice could not be cached (%s)", key.dirname, exc)
        path = "nowhere"
    log.info(
        "ovl tune: %s: %s, %.3f of cuBLAS at %d rows (the table's pick %s: %s); %s; %d candidates in %.0f s; cached in %s",
        key.dirname,
        rec.chosen.label,
        rec.ratio,
        rec.m,
        rec.table.label,
        _ratio(rec.table_ratio),
        rec.reason,
        len(rec.candidates),
        rec.seconds,
        path,
    )
    return _keep(entry, chosen, rec)


def _ratio(r: float | None) -> str:
    return "did not run" if r is None else f"{r:.3f} of cuBLAS"


def _keep(entry: str, key: KernelKey, rec: TuneRecord | None) -> KernelKey:
    _bound[entry] = key
    if rec is not None:
        _records[entry] = rec
    return key


def _bindable(rec: TuneRecord, key: KernelKey) -> bool:
    """Whether a cached choice can be bound here: its kernels compiled on the search path, or a compiler to build them."""
    chosen = key if rec.table_chosen else dataclasses.replace(key, config=rec.chosen)
    if find(chosen) is not None or compiler() is not None:
        return True
    log.warning(
        "ovl tune: %s: the cached choice %s is not compiled here and no compiler is at hand; tuning again", key.dirname, rec.chosen.label
    )
    return False


# ---- agreement between the ranks of a torchrun group (no-ops for one process) ----
def _agreed(group: Group | None, value: Any) -> bool:
    """Whether every rank of ``group`` holds the same ``value`` (a host collective under torchrun)."""
    if not isinstance(group, DistGroup):
        return True
    import torch.distributed as dist

    seen: list[Any] = [None] * group.world
    dist.all_gather_object(seen, value, group=group.pg)
    return all(v == seen[0] for v in seen)


def _slowest(group: Group | None, values: list[float]) -> list[float]:
    """Each value's maximum over the ranks of ``group`` (inf where a rank has none)."""
    if not isinstance(group, DistGroup):
        return values
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group.pg)
    return [float(v) for v in t.tolist()]


# ---- one shape ----
def _tune(key: KernelKey, group: Group | None, s: TuneSettings, gpu: str, entry: str) -> TuneRecord:
    t0 = time.monotonic()
    try:
        cands: list[Candidate] | str = prepare_candidates(key, s.top_k, timeout_s=s.budget_s)
    except (RunnerError, OSError, ValueError, subprocess.SubprocessError) as exc:
        # The compiler failed or said something unreadable, a library folder could not be written: not tuned.
        cands = f"{type(exc).__name__}: {exc}"
    # Every rank must go on with the same candidates, or none does.
    if not _agreed(group, cands if isinstance(cands, str) else [c.config.label for c in cands]) or isinstance(cands, str):
        raise TuneRefused(cands if isinstance(cands, str) else "the ranks listed different candidates")
    N, K = key.n, key.k
    M = _measured_rows(cands[0])
    num_sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    pool = BufferPool()
    table_path = find(cands[0].key)
    table_m = load_manifest(table_path, symbolic=True) if table_path is not None else None
    kernels: list[ComputeKernel | None] = []
    errors: list[str | None] = []
    for i, c in enumerate(cands):
        # The budget, agreed: the slowest rank's elapsed time decides whether another candidate is loaded.
        if i > 0 and _slowest(group, [time.monotonic() - t0])[0] > s.budget_s:
            kernels.append(None)
            errors.append(f"not measured: the tuning budget of {s.budget_s:.0f} s was spent")
            continue
        kernel, error = _load(c, M, N, K, num_sms, pool, None if i == 0 else table_m)
        kernels.append(kernel)
        errors.append(error)
    live = [(i, k) for i, k in enumerate(kernels) if k is not None]
    cublas = Cublas(M, N, K)
    times = sweeps([cublas.launch, *(k.launch for _, k in live)], s.sweeps)
    # Each candidate's time over cuBLAS's in the same sweep (drift cancels), the slowest rank's; as ms at cuBLAS's
    # median time, for people.
    rel: list[float] = [math.inf] * len(cands)
    for (i, _), r in zip(live, relative(times)[1:]):
        rel[i] = math.inf if r is None else r
    *rel, cublas_ms = _slowest(group, [*rel, statistics.median(times[0])])
    cands_ms = [cublas_ms * r if math.isfinite(r) else None for r in rel]
    pick = choose(cands_ms, s.min_gain)
    chosen, table = cands[pick.index], cands[0]
    del kernels, live, pool, cublas
    return TuneRecord(
        entry=entry,
        dirname=chosen.key.dirname,
        chosen=chosen.config,
        table=table.config,
        table_chosen=pick.index == 0,
        m=M,
        ms=cands_ms[pick.index] or math.inf,
        table_ms=cands_ms[0],
        cublas_ms=cublas_ms,
        seconds=time.monotonic() - t0,
        gpu=gpu,
        when=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        candidates=tuple(
            CandidateTime(c.config, c.source, t, None if t is not None else (e or "no time")) for c, t, e in zip(cands, cands_ms, errors)
        ),
        reason=pick.reason,
    )


def _load(
    c: Candidate, M: int, N: int, K: int, num_sms: int, pool: BufferPool, table: Manifest | None
) -> tuple[ComputeKernel | None, str | None]:
    """Candidate ``c``'s GEMM kernel loaded and checked on random operands (its first launch compiles it), or why not.
    ``table``: the table pick's manifest, whose row counts an any-row-count candidate must serve as well."""
    try:
        path = find(c.key)
        if path is None:
            raise KernelNotCompiled(f"{c.key.dirname} is not in the library")
        sym = load_manifest(path, symbolic=True)
        check_manifest(sym, c.key, path)
        narrower = _narrower(sym, table)
        if narrower is not None:
            return None, narrower
        kernel = ComputeKernel(instantiate(sym, M) if sym.rows is not None else sym, num_sms, pool)
        err = kernel.check(M, N, K)
    except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is a result, not a failure of tuning
        log.info("ovl tune: %s: %s: %s", c.key.dirname, type(exc).__name__, str(exc)[:300])
        return None, f"{type(exc).__name__}: {str(exc)[:300]}"
    if not err <= REL_TOLERANCE:  # NaN too: an element never written
        return None, f"wrong result: relative error {err:.3g} against the fp32 reference"
    return kernel, None


def _narrower(m: Manifest, table: Manifest | None) -> str | None:
    """Why an any-row-count candidate would overlap fewer row counts than the table's pick (a larger m-block needs
    more rows per chunk; its crossover may lie higher), or None: tuning must not take overlap away from any M."""
    if table is None or m.rows is None or table.rows is None:
        return None
    a, t = m.rows, table.rows
    if a.min > t.min or a.max < t.max:
        return f"serves {a.min}..{a.max} rows, the table's pick {t.min}..{t.max}"
    if (a.fallback_below or 0) > (t.fallback_below or 0):
        return f"overlaps from {a.fallback_below} rows, the table's pick from {t.fallback_below or t.min}"
    return None


def _measured_rows(table: Candidate) -> int:
    """The row count a key's candidates are measured at: its own M; for an any-row-count operator whose compiler
    crossover lies above it (below it the runner does not overlap, the kernel never runs), the crossover.
    @raises TuneRefused where the crossover lies above every row count served: the GEMM kernel never runs."""
    key = table.key
    path = find(key)
    if not key.rows or path is None:
        return key.m
    rows = load_manifest(path, symbolic=True).rows
    if rows is None or rows.fallback_below is None or rows.fallback_below <= key.m:
        return key.m
    at = -(-rows.fallback_below // rows.multiple) * rows.multiple
    if at > rows.max:
        raise TuneRefused(
            f"the operator never runs its GEMM kernel: {rows.fallback_reason or 'it does not overlap at any row count it serves'}"
        )
    return at
