"""Diagnostic: where does an emitted operator's launch spend its time, on several GPUs? Per manifest (torchrun,
one process per GPU): the whole launch; every kernel alone (its waits targeting epoch 0, so they pass at
once); the host's time to enqueue one launch; the host streams' copies alone (no waits, no signals); and
the launch without its last kernel
(for GEMM+RS and GEMM+AR the reduction after the deliveries). Times are medians over ranks' medians' max.
Then one launch's timeline on rank 0: when each kernel and each host copy ended, from the launch's start
(CUDA events recorded on their streams).

    torchrun --nproc_per_node=4 packages/bench/gpu/diag/diag_rs.py out/ar_mlp1_w4_/manifest.json [...]
"""

import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "runtime-py", "src"))
from ovl_runtime.gpu import _init_distributed  # noqa: E402
from ovl_runtime.gpu_session import GpuSession  # noqa: E402
from ovl_runtime.manifest import load_manifest  # noqa: E402


def med(fn, reps=20, warm=3):
    """The slowest rank's median (ms) of ``fn`` between barriers."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    t = torch.tensor([statistics.median(ts)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def host_ms(fn, reps=10) -> float:
    """The host's median time (ms) to run ``fn`` (enqueueing work), the device idle before each."""
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    torch.cuda.synchronize()
    return statistics.median(ts)


def copies_only(s: GpuSession) -> None:
    main = torch.cuda.current_stream()
    for _name, st, ops in s.host_streams:
        st.wait_stream(main)
        with torch.cuda.stream(st):
            for op in ops:
                if op[0] == "copy":
                    op[1].copy_(op[2], non_blocking=True)
    for _name, st, _ops in s.host_streams:
        main.wait_stream(st)


def launch_ops_first(s: GpuSession) -> None:
    """``GpuSession.launch`` with the host streams' ops enqueued before the compute kernels (their
    waits hold the copies until the kernels signal), so the copies are queued before the GEMM runs."""
    main = torch.cuda.current_stream()
    s.advance_epoch()
    start = torch.cuda.Event()
    start.record(main)
    for _name, st, ops in s.host_streams:
        st.wait_event(start)
        s.enqueue_host_ops(ops, st, False, s.stream_waits)
    comm = [kd for kd in s.kernels if kd["spec"].stream == "comm"]
    if comm:
        s.comm_kernel_stream.wait_event(start)
        with torch.cuda.stream(s.comm_kernel_stream):
            for kd in comm:
                s.launch_kernel(kd, False)
    for kd in s.kernels:
        if kd["spec"].stream == "compute":
            s.launch_kernel(kd, False)
    for _name, st, _ops in s.host_streams:
        main.wait_stream(st)
    if comm:
        main.wait_stream(s.comm_kernel_stream)


def timeline(s: GpuSession) -> list[tuple[str, float]]:
    """One launch with an event after every kernel and every host op: (what, ms after the start)."""
    main = torch.cuda.current_stream()
    marks: list[tuple[str, torch.cuda.Event]] = []

    def mark(what: str) -> None:
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        marks.append((what, e))

    start = torch.cuda.Event(enable_timing=True)
    launch_kernel, enqueue = s.launch_kernel, s.enqueue_host_ops

    def timed_kernel(kd, warm):
        launch_kernel(kd, warm)
        mark(f"kernel {kd['spec'].template_kind}")

    def timed_ops(ops, stream, warm, waits):
        for i, op in enumerate(ops):
            enqueue([op], stream, warm, waits)
            with torch.cuda.stream(stream):
                mark(f"{op[0]} {i}" + (f" ({op[1].numel() * op[1].element_size() >> 20} MiB)" if op[0] == "copy" else ""))

    s.launch_kernel, s.enqueue_host_ops = timed_kernel, timed_ops
    try:
        dist.barrier()
        torch.cuda.synchronize()
        start.record(main)
        s.launch()
        s.sync()
    finally:
        s.launch_kernel, s.enqueue_host_ops = launch_kernel, enqueue
    return [(what, start.elapsed_time(e)) for what, e in marks]


def main() -> None:
    for path in sys.argv[1:]:
        m = load_manifest(path)
        if not dist.is_initialized():
            _init_distributed(m)
            triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        rank = dist.get_rank()
        s = GpuSession(m, rank, torch.cuda.get_device_properties(0).multi_processor_count)
        s.launch(warm=True)
        s.sync()
        parts = [("launch", med(lambda s=s: (s.launch(), s.sync())))]
        if s.host_streams:
            # Variants of the launch, one launch each in turn: as the session launches, and with the host
            # ops through torch (gpu_memops off).
            driver = s.driver

            def via_torch(s=s):
                s.driver = None
                try:
                    s.launch()
                finally:
                    s.driver = driver

            variants = {"session": s.launch, "host ops via torch": via_torch}
            times = {k: [] for k in variants}
            for i in range(30 * len(variants)):
                name = list(variants)[i % len(variants)]
                times[name].append(med(lambda f=variants[name], s=s: (f(), s.sync()), reps=1, warm=0))
            parts += [(f"launch ({k})", statistics.median(v)) for k, v in times.items()]
        # The host's time to enqueue one launch (no sync inside): a launch cannot end before its last op is enqueued.
        host = []
        for _ in range(10):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            s.launch()
            host.append((time.perf_counter() - t0) * 1e3)
            s.sync()
        parts.append(("host enqueue", statistics.median(host)))
        # Where the host's time goes: each kernel's launch and each host stream's ops, enqueued alone.
        for kd in s.kernels:
            parts.append((f"host: {kd['spec'].template_kind} launch", host_ms(lambda kd=kd, s=s: s.launch_kernel(kd, True))))
        for name, st, ops in s.host_streams:
            parts.append((f"host: {name} ops", host_ms(lambda st=st, ops=ops, s=s: s.enqueue_host_ops(ops, st, True, s.stream_waits))))
        if s.host_streams:
            parts.append(("launch, host ops first", med(lambda s=s: (launch_ops_first(s), s.sync()))))
        for kd in s.kernels:
            parts.append((f"{kd['spec'].template_kind} alone", med(lambda kd=kd, s=s: s.launch_kernel(kd, True))))
        copies = sum(1 for _n, _st, ops in s.host_streams for op in ops if op[0] == "copy")
        if copies:
            parts.append((f"{copies} copies alone", med(lambda s=s: copies_only(s))))
        if len(s.kernels) > 1:
            every = s.kernels
            s.kernels = every[:-1]
            parts.append((f"launch without {every[-1]['spec'].template_kind}", med(lambda s=s: (s.launch(), s.sync()))))
            s.kernels = every
        events = timeline(s)
        if rank == 0:
            print(f"{m.name}: " + " | ".join(f"{n} {t:.3f}" for n, t in parts), flush=True)
            print("  timeline (rank 0): " + ", ".join(f"{w} {t:.3f}" for w, t in events), flush=True)
        del s
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
