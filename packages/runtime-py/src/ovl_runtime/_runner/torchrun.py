"""GPU mode: one process per GPU under torchrun; checks against torch, times with CUDA events.

torch and triton are imported here lazily, after the multicast switches and the
symmetric-memory backend are set in the environment, so that the package imports (and its
CPU emulation runs) on machines without them. ``run_gpu_many`` runs several manifests of
one world in one process group (set up and torn down once), each in a session of its own
that is freed before the next; ``run_gpu`` is its one-manifest case.

Several processes may share a GPU (torchrun's local world larger than the visible GPUs, e.g.
``CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node=2``): the process group is then gloo (NCCL refuses two ranks
on one GPU), local rank ``r`` runs on GPU ``r mod gpus``, and manifests of the ``nvshmem`` backend run on NVSHMEM
bootstrapped by ovl through nvshmem4py (``_runner.nvshmem_select``, ``_runner.nvshmem_direct``). Host-side waits
between ranks are the process group's collectives, bounded by its timeout (``OVL_HOST_TIMEOUT_S``, default 180 s,
for a gloo group; NCCL's default otherwise).
"""

from __future__ import annotations

import gc
import os
import statistics
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .._manifest.types import Manifest
from .._report.outcome import CheckRecord, RunOutcome
from ..errors import CheckFailed, DeviceError, RunnerError, UsageError
from .env import process_backends, select_symm_backend
from .nvshmem_select import Placement, placement

ProgressFn = Callable[[dict[str, Any]], None]
SHARED_NOTE = (
    "processes share a GPU (NVSHMEM's limited multiple-processes-per-GPU mode): a correctness run; times are not performance figures"
)


def host_timeout_s() -> float:
    """The bound of host-side waits between ranks in a gloo group (``OVL_HOST_TIMEOUT_S``, default 180)."""
    raw = os.environ.get("OVL_HOST_TIMEOUT_S", "180")
    try:
        value = float(raw)
    except ValueError as exc:
        raise UsageError(f"OVL_HOST_TIMEOUT_S={raw!r} is not a number of seconds") from exc
    if value <= 0:
        raise UsageError(f"OVL_HOST_TIMEOUT_S={raw!r} must be positive")
    return value


@dataclass
class GpuProcess:
    """This process in an initialised process group: its rank, where it runs, its directly bootstrapped NVSHMEM."""

    rank: int
    where: Placement
    nvshmem: Any = None  # a DirectNvshmem, or None


def _init_distributed(m: Manifest, where: Placement) -> int:
    import torch
    import torch.distributed as dist

    if "RANK" not in os.environ:
        if m.world != 1:
            raise UsageError(
                f"the manifest is for {m.world} ranks: run it as torchrun --nproc_per_node={m.world} -m ovl_runtime run <manifest.json>"
            )
        os.environ.update(
            {
                "RANK": "0",
                "WORLD_SIZE": "1",
                "LOCAL_RANK": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": os.environ.get("MASTER_PORT", "29517"),
            }
        )
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = where.device(local)
    torch.cuda.set_device(device)
    if where.process_group_backend == "gloo":  # processes share a GPU: NCCL refuses two ranks on one device
        dist.init_process_group("gloo", timeout=timedelta(seconds=host_timeout_s()))
    else:
        dist.init_process_group("nccl", device_id=torch.device("cuda", device))
    return dist.get_rank()


@contextmanager
def gpu_process(manifests: Sequence[Manifest], symm_backend: str = "auto", baselines: bool = False) -> Iterator[GpuProcess]:
    """The process group (and, for ``nvshmem`` manifests on a shared GPU, ovl's own NVSHMEM) of ``manifests``, set up
    before the block and torn down after it: NVSHMEM finalized only after a bounded barrier passed, then the group
    destroyed. The environment is set before torch is imported (``process_backends``)."""
    worlds = sorted({m.world for m in manifests})
    if len(worlds) > 1:
        raise UsageError(f"one process group runs one world, but these manifests are for worlds {', '.join(map(str, worlds))}")
    # Before torch: PyTorch reads TORCH_SYMMMEM when it is imported (NVSHMEM for manifests that put through it,
    # unless ovl bootstraps NVSHMEM itself).
    symm, heap = process_backends(manifests, symm_backend)
    select_symm_backend(symm)
    where = placement()
    if baselines and where.shared:
        raise UsageError(f"--baselines times NCCL collectives across GPUs; here {where.local_world} processes share {where.gpus} GPU(s)")
    import torch
    import torch.distributed as dist
    import triton

    from .session import check_world

    rank = _init_distributed(manifests[0], where)
    proc = GpuProcess(rank, where)
    try:
        check_world(manifests[0])
        if heap == "direct":
            from .nvshmem_direct import DirectNvshmem

            store = dist.distributed_c10d._get_default_store()
            proc.nvshmem = DirectNvshmem.start(rank, dist.get_world_size(), torch.cuda.current_device(), store, host_timeout_s())
        # TMA descriptors built inside kernels (tl.make_tensor_descriptor) need scratch memory.
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        yield proc
    finally:
        try:
            if proc.nvshmem is not None:
                proc.nvshmem.finalize(_bounded_barrier())
        finally:
            dist.destroy_process_group()


def _bounded_barrier() -> bool:
    """A process-group barrier (bounded by its timeout): whether every rank reached it."""
    import torch
    import torch.distributed as dist

    try:
        torch.cuda.synchronize()
        dist.barrier()
        return True
    except Exception:  # noqa: BLE001 - a peer that is gone (or timed out): the caller skips collective teardown
        return False


def run_gpu(
    m: Manifest,
    epochs: int | None = None,
    seed: int = 0,
    baselines: bool = False,
    symm_backend: str = "auto",
    on_progress: ProgressFn | None = None,
) -> RunOutcome:
    """Run ``m`` on this process's GPU: warm-up, checked launches, timed launches, baselines.

    Failures (a wait timeout, a failed check) end the run and are listed in the outcome;
    an error that keeps the run from starting is raised (the GPU stack's own as
    ``DeviceError``). One manifest of ``run_gpu_many``.
    """
    progress = on_progress or _no_progress
    (result,) = run_gpu_many(
        [m], epochs=epochs, seed=seed, baselines=baselines, symm_backend=symm_backend, progress_for=lambda _i, _m: progress
    )
    if isinstance(result, RunnerError):
        raise result
    return result


def run_gpu_many(
    manifests: Sequence[Manifest],
    epochs: int | None = None,
    seed: int = 0,
    baselines: bool = False,
    symm_backend: str = "auto",
    progress_for: Callable[[int, Manifest], ProgressFn] | None = None,
) -> Iterator[RunOutcome | RunnerError]:
    """Run every manifest in turn in one process group, initialised once and destroyed once.

    All manifests must have the same ``world``. Yields, per manifest in order, its outcome
    (failures such as a wait timeout or a failed check are listed in it), or the
    ``RunnerError`` that kept it from running (a kernel that does not import, a stale
    cubin...). An exception of the GPU stack itself (an illegal address...) is yielded as a
    ``DeviceError`` and ends the run: the CUDA context may be unusable, so the manifests
    after it are neither run nor yielded. Errors before the first manifest (process group,
    world size) are raised. ``progress_for(i, m)`` gives the progress function of the
    ``i``-th run; it is called just before that run starts. After each result is taken, the
    ranks free its session and meet at a barrier before the next run (or the teardown).
    """
    if not manifests:
        return
    import torch
    import torch.distributed as dist

    with gpu_process(manifests, symm_backend, baselines) as proc:
        for i, m in enumerate(manifests):
            progress = progress_for(i, m) if progress_for is not None else _no_progress
            result: RunOutcome | RunnerError
            try:
                result = _run_one(m, proc, epochs, seed, baselines, progress)
            except RunnerError as exc:
                result = exc.with_traceback(None)  # the traceback's frames would keep the session's memory
            except Exception as exc:  # noqa: BLE001 - the GPU stack's own errors, reported as values
                err = DeviceError(f"{type(exc).__name__}: {exc}")
                err.__cause__ = exc.with_traceback(None)
                yield err
                return
            yield result
            # Free this manifest's buffers before the next one allocates, then move on together
            # (and only once rank 0 has written the report it was just given).
            gc.collect()  # a session and its precompiled kernels refer to each other
            torch.cuda.empty_cache()
            dist.barrier()


def _no_progress(_event: dict[str, Any]) -> None:
    pass


def _run_one(m: Manifest, proc: GpuProcess, epochs: int | None, seed: int, baselines: bool, progress: ProgressFn) -> RunOutcome:
    """One manifest in an initialised process group: allocate, check, time, baselines."""
    import torch
    import triton

    from .baselines import baselines as run_baselines
    from .session import TORCH_DTYPES, GpuSession

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    backend = "NVSHMEM (nvshmem4py)" if proc.nvshmem is not None and m.requires_nvshmem else os.environ["TORCH_SYMMMEM"]
    outcome = RunOutcome(mode="gpu", device=torch.cuda.get_device_name(), backend=backend, clock="cuda-events")
    outcome.extra = {"torch": torch.__version__, "triton": triton.__version__, "numSms": props.multi_processor_count}
    if proc.where.shared:
        outcome.extra.update({"localProcesses": proc.where.local_world, "visibleGpus": proc.where.gpus, "note": SHARED_NOTE})
    session = GpuSession(m, proc.rank, props.multi_processor_count, nvshmem=proc.nvshmem)
    try:
        progress({"event": "allocated", "device": outcome.device, "backend": outcome.backend})
        try:
            _checked_and_timed(m, session, outcome, epochs, seed, progress)
        except RunnerError as exc:
            outcome.failures.append(exc.with_traceback(None))
            progress({"event": "failure", **exc.to_json()})
        if baselines and not outcome.failures:
            progress({"event": "baselines"})
            outcome.baselines = run_baselines(m, TORCH_DTYPES[m.dtype], m.timing.warmup, m.timing.reps)
        return outcome
    finally:
        session.close()  # a direct NVSHMEM session gives its symmetric memory back (collective, after a bounded barrier)
        del session


def _checked_and_timed(m: Manifest, s: Any, outcome: RunOutcome, epochs: int | None, seed: int, progress: ProgressFn) -> None:
    """Warm-up, ``epochs`` checked launches on fresh inputs, then ``timing.reps`` timed ones."""
    import torch
    import torch.distributed as dist

    from .._reference.on_gpu import output_view, torch_reference
    from .._reference.tensors import relative_error
    from .baselines import timed
    from .host_gather import gather_floats

    # Warm-up: every kernel (the runner's own wait kernel included) compiles and loads
    # while nothing can spin, since device waits target 0 (a precompiled kernel that sends
    # on every launch waits for its own epoch's arrivals instead: cubin_launch.launch_epoch).
    s.launch(warm=True)
    s.sync()
    s.raise_wait_errors()
    dist.barrier()
    progress({"event": "warmed-up", "epoch": s.epoch})
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed * 7919 + s.rank)
    runs = epochs if epochs is not None else m.timing.check_runs
    for run in range(runs):
        s.init_buffers(gen)
        snap = {key: s.tensors[name].clone() for key, name in m.reference.inputs.items()}
        s.launch()
        s.sync()
        s.raise_wait_errors()
        ref = torch_reference(m, snap, s.rank)
        err = relative_error(output_view(m, s.tensors[m.reference.output], s.rank), ref)
        rec = CheckRecord.of(run, s.epoch, [row[0] for row in gather_floats([err])], m.reference.tolerance)
        outcome.checks.append(rec)
        progress({"event": "check", "run": run, "epoch": rec.epoch, "maxRelError": rec.max_rel_error, "ok": rec.ok})
        del snap, ref
        if not rec.ok:
            raise CheckFailed(rec.describe(), rank=rec.worst_rank, run=run)
        dist.barrier()
    progress({"event": "timing", "warmup": m.timing.warmup, "reps": m.timing.reps})
    mine = timed(s.launch, m.timing.warmup, m.timing.reps)
    s.sync()
    s.raise_wait_errors()
    outcome.times_ms = gather_floats([float(x) for x in mine])
    progress({"event": "timed", "maxMedian": max(statistics.median(t) for t in outcome.times_ms)})
