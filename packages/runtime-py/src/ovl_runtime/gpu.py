"""GPU mode: one process per GPU under torchrun; checks against torch, times with CUDA events.

torch and triton are imported here lazily, after the multicast switches and the
symmetric-memory backend are set in the environment, so that the package imports (and its
CPU emulation runs) on machines without them.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

from .env import set_safe_env
from .errors import CheckFailed, RunnerError, UsageError
from .manifest import Manifest
from .outcome import CheckRecord, RunOutcome

ProgressFn = Callable[[dict[str, Any]], None]


def _init_distributed(m: Manifest) -> int:
    import torch
    import torch.distributed as dist

    if "RANK" not in os.environ:
        if m.world != 1:
            raise UsageError(f"the manifest is for {m.world} ranks: run it as torchrun --nproc_per_node={m.world} -m ovl_runtime run <manifest.json>")
        os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": os.environ.get("MASTER_PORT", "29517")})
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.get_rank()


def run_gpu(m: Manifest, epochs: int | None = None, seed: int = 0, baselines: bool = False,
            symm_backend: str = "cuda", on_progress: ProgressFn | None = None) -> RunOutcome:
    """Run ``m`` on this process's GPU: warm-up, checked launches, timed launches, baselines.

    Failures (a wait timeout, a failed check) end the run and are listed in the outcome.
    """
    set_safe_env(symm_backend)
    import torch
    import torch.distributed as dist
    import triton

    from .gpu_reference import baselines as run_baselines
    from .gpu_session import TORCH_DTYPES, GpuSession, check_world

    progress = on_progress or (lambda _e: None)
    rank = _init_distributed(m)
    try:
        check_world(m)
        # TMA descriptors built inside kernels (tl.make_tensor_descriptor) need scratch memory.
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        outcome = RunOutcome(mode="gpu", device=torch.cuda.get_device_name(), backend=os.environ["TORCH_SYMMMEM"], clock="cuda-events")
        outcome.extra = {"torch": torch.__version__, "triton": triton.__version__, "numSms": props.multi_processor_count}
        session = GpuSession(m, rank, props.multi_processor_count)
        progress({"event": "allocated", "device": outcome.device, "backend": outcome.backend})
        try:
            _checked_and_timed(m, session, outcome, epochs, seed, progress)
        except RunnerError as exc:
            outcome.failures.append(exc)
            progress({"event": "failure", **exc.to_json()})
        if baselines and not outcome.failures:
            progress({"event": "baselines"})
            outcome.baselines = run_baselines(m, TORCH_DTYPES[m.dtype], m.timing.warmup, m.timing.reps)
        return outcome
    finally:
        dist.destroy_process_group()


def _checked_and_timed(m: Manifest, s: Any, outcome: RunOutcome, epochs: int | None, seed: int, progress: ProgressFn) -> None:
    """Warm-up, ``epochs`` checked launches on fresh inputs, then ``timing.reps`` timed ones."""
    import torch
    import torch.distributed as dist

    from .gpu_reference import output_view, relative_error, timed, torch_reference

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
        every = torch.tensor([err], device="cuda", dtype=torch.float64)
        gathered = [torch.empty_like(every) for _ in range(m.world)]
        dist.all_gather(gathered, every)
        rec = CheckRecord.of(run, s.epoch, [float(t.item()) for t in gathered], m.reference.tolerance)
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
    local = torch.tensor(mine, device="cuda", dtype=torch.float64)
    gathered = [torch.empty_like(local) for _ in range(m.world)]
    dist.all_gather(gathered, local)
    outcome.times_ms = [[float(x) for x in t.tolist()] for t in gathered]
    progress({"event": "timed", "maxMedian": max(statistics.median(t) for t in outcome.times_ms)})
