"""The bench's one GPU timer: every GPU suite here times with it, so their figures mean the same thing.

- ``event_times``: CUDA events around each repetition (optionally after an L2 flush, a barrier, or
  ``batch`` calls back to back), in ms; ``stats`` and ``slowest_rank_median`` reduce them.
- ``graphed``: a callable captured once in a CUDA graph, for timing eager calls beside their replays.
- ``host_wall_us``: the host time to enqueue a call and the wall time per call (CPU clock).

Run as a script it measures the torch API's host cost per forward of the tensor-parallel MLP layer, eager
against one CUDA-graph replay (one GPU, all 8 ranks in one process: ``OneGpuGroup``); the wall times there
are those of 8 ranks sharing one GPU, not performance figures; the host times are what a model pays a call:

    OVL_KERNELS=<library> PYTHONPATH=packages/runtime-py/src python3 packages/bench/gpu/timer.py host-overhead OUT.json
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

#: Bytes written before a repetition to evict the L2 (50 MB on an H100/H200) of the previous one's operands.
FLUSH_BYTES = 256 * 2**20


def flush_buffer() -> torch.Tensor:
    """The buffer ``event_times(flush=...)`` zeroes before each repetition."""
    return torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")


def event_times(
    fn: Callable[[], object],
    reps: int,
    *,
    warmup: int = 2,
    flush: torch.Tensor | None = None,
    batch: int = 1,
    before: Callable[[], object] | None = None,
    sync_each: bool = False,
) -> list[float]:
    """Milliseconds per call of ``fn`` in each of ``reps`` repetitions, after ``warmup`` calls.

    A repetition is ``batch`` calls back to back between two CUDA events (its time divided by ``batch``),
    preceded by ``before()`` (a barrier, say: then the host's enqueue of an eager call is on the timed path)
    and by zeroing ``flush`` (the L2 holds none of the last repetition's data). ``sync_each`` waits for each
    repetition before the next is enqueued; otherwise all are enqueued and read after one synchronize.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = []
    for _ in range(reps):
        if before is not None:
            before()
        if flush is not None:
            flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        if sync_each:
            end.synchronize()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / batch for s, e in pairs]


def stats(times: list[float]) -> dict[str, float]:
    """Median, 10th and 90th percentile (ms) and the count of ``times``."""
    t = sorted(times)
    return {"ms": statistics.median(t), "p10": t[len(t) // 10], "p90": t[(9 * len(t)) // 10], "reps": len(t)}


def slowest_rank_median(times: list[float]) -> float:
    """The largest over the ranks of torch.distributed's default group of each rank's median of ``times``."""
    import torch.distributed as dist

    med = torch.tensor([statistics.median(times)], device="cuda")
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    return float(med.item())


def graphed(fn: Callable[[], object], here: bool = False) -> Callable[[], None]:
    """``fn`` captured once in a CUDA graph (after one eager call); returns the replay. The capture runs on a
    side stream of its own, or (``here``) on the current stream, where a training step that ran its eager calls
    there must be captured (autograd nodes keep the stream they were made on)."""
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    if here:
        with torch.cuda.graph(g, stream=torch.cuda.current_stream()):
            fn()
    else:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.cuda.graph(g, stream=side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    return g.replay


def host_wall_us(fn: Callable[[], object], calls: int = 50, rounds: int = 5) -> tuple[float, float]:
    """(host µs to enqueue one call, wall µs per call) over ``calls`` calls back to back, median of ``rounds``."""
    host, wall = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        wall.append((t2 - t0) / calls * 1e6)
    return statistics.median(host), statistics.median(wall)


def gpu_state() -> str:
    """SM clock, its maximum, temperature and power draw now (nvidia-smi), recorded beside a run's times."""
    try:
        q = "clocks.sm,clocks.max.sm,temperature.gpu,power.draw"
        cmd = ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"]
        return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # noqa: BLE001 - a missing nvidia-smi is recorded, not fatal
        return f"unavailable: {exc}"


def host_overhead(out: str, world: int = 8, seq: int = 1024, hidden: int = 1024, inter: int = 4096) -> dict:
    """The torch API's tensor-parallel MLP layer (AllGather+GEMM, SiLU-mul, GEMM+ReduceScatter) per forward,
    eager and as one CUDA-graph replay: host and wall µs, the error after the replays; written to ``out``."""
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.nn import TensorParallelMLP

    def rand(*shape: int, seed: int) -> torch.Tensor:
        g = torch.Generator(device="cuda").manual_seed(seed)
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)

    g = OneGpuGroup(world)
    gate, up, down = rand(inter, hidden, seed=1) / 32, rand(inter, hidden, seed=2) / 32, rand(hidden, inter, seed=3) / 64
    mlp = TensorParallelMLP.from_dense(gate, up, down, g)
    xs = rand(world, seq // world, hidden, seed=4)
    with torch.no_grad():
        for _ in range(3):
            mlp(xs)
        ops.synchronize(g)
        eager = host_wall_us(lambda: mlp(xs))
        ops.synchronize(g)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = mlp(xs)
        for _ in range(3):
            graph.replay()
        replay = host_wall_us(graph.replay)
        ops.synchronize(g)
        x = xs.reshape(seq, hidden)
        want = (torch.nn.functional.silu(x @ gate.t()) * (x @ up.t())) @ down.t()
        err = ((y.reshape(seq, hidden).float() - want.float()).norm() / want.float().norm()).item()
    launches = {
        op.m.name: {"copies": sum(len(s.ops) for h in op.m.host_ops for s in h.streams), "kernels": len(op.m.kernels)}
        for op in ops.operators()
    }
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "mode": "one GPU, every rank in one process (OneGpuGroup)",
        "layer": {"world": world, "seq": seq, "hidden": hidden, "intermediate": inter, "dtype": "bf16"},
        "perForwardUs": {"eager": {"host": eager[0], "wall": eager[1]}, "graph": {"host": replay[0], "wall": replay[1]}},
        "calls": 50,
        "rounds": 5,
        "relErrorAfterReplays": err,
        "operators": launches,
        "note": f"{world} ranks share one GPU: wall times are not performance figures; host times are the per-call cost a model pays",
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"{'':8} {'host µs/forward':>16} {'wall µs/forward':>16}")
    for name, (h, w) in (("eager", eager), ("graph", replay)):
        print(f"{name:8} {h:16.1f} {w:16.1f}")
    print(f"rel error after replays {err:.4f}")
    ops.close_all(force=True)
    return result


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "host-overhead":
        sys.exit("usage: python3 packages/bench/gpu/timer.py host-overhead [OUT.json]")
    host_overhead(sys.argv[2] if len(sys.argv) > 2 else "host_overhead.json")
