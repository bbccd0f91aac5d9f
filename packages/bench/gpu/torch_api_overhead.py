"""Host launch overhead of the torch API, eager vs a captured CUDA graph (one GPU, every rank in one process).

    OVL_KERNELS=<library> PYTHONPATH=packages/runtime-py/src python3 packages/bench/gpu/torch_api_overhead.py <out.json>

The layer is the tensor-parallel MLP (``ovl_runtime.nn.TensorParallelMLP``: AllGather+GEMM,
SiLU-mul, GEMM+ReduceScatter) at world 8 in the one-GPU mode (``OneGpuGroup``), hidden 1024,
intermediate 4096, 1024 tokens. Per forward: the host time to enqueue it (the Python calls,
the per-chunk copies and their signals of all 8 ranks, the kernel launches) and the wall
time per forward over many back to back, eager and as one CUDA-graph replay. The GPU
times are those of 8 ranks sharing one GPU: not performance figures; the host times are
what a model pays per call.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from ovl_runtime import ops
from ovl_runtime.groups import OneGpuGroup
from ovl_runtime.nn import TensorParallelMLP

WORLD, SEQ, HIDDEN, INTER = 8, 1024, 1024, 4096
CALLS, ROUNDS = 50, 5


def rand(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g)


def timed(fn) -> tuple[float, float]:
    """(host µs to enqueue one call, wall µs per call) over CALLS calls, median of ROUNDS."""
    host, wall = [], []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append((t1 - t0) / CALLS * 1e6)
        wall.append((t2 - t0) / CALLS * 1e6)
    return statistics.median(host), statistics.median(wall)


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "torch_api_overhead.json"
    g = OneGpuGroup(WORLD)
    gate, up, down = rand(INTER, HIDDEN, seed=1) / 32, rand(INTER, HIDDEN, seed=2) / 32, rand(HIDDEN, INTER, seed=3) / 64
    mlp = TensorParallelMLP.from_dense(gate, up, down, g)
    xs = rand(WORLD, SEQ // WORLD, HIDDEN, seed=4)
    with torch.no_grad():
        for _ in range(3):
            mlp(xs)
        ops.synchronize(g)
        eager = timed(lambda: mlp(xs))
        ops.synchronize(g)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = mlp(xs)
        for _ in range(3):
            graph.replay()
        replay = timed(graph.replay)
        ops.synchronize(g)
        want = (torch.nn.functional.silu(xs.reshape(SEQ, HIDDEN) @ gate.t()) * (xs.reshape(SEQ, HIDDEN) @ up.t())) @ down.t()
        err = ((y.reshape(SEQ, HIDDEN).float() - want.float()).norm() / want.float().norm()).item()
    launches = {op.m.name: {"copies": sum(len(s.ops) for h in op.m.host_ops for s in h.streams), "kernels": len(op.m.kernels)} for op in ops.operators()}
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "mode": "one GPU, every rank in one process (OneGpuGroup)",
        "layer": {"world": WORLD, "seq": SEQ, "hidden": HIDDEN, "intermediate": INTER, "dtype": "bf16"},
        "perForwardUs": {
            "eager": {"host": eager[0], "wall": eager[1]},
            "graph": {"host": replay[0], "wall": replay[1]},
        },
        "calls": CALLS,
        "rounds": ROUNDS,
        "relErrorAfterReplays": err,
        "operators": launches,
        "note": "8 ranks share one GPU: wall times are not performance figures; host times are the per-call cost a model pays",
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"{'':8} {'host µs/forward':>16} {'wall µs/forward':>16}")
    for name, (h, w) in (("eager", eager), ("graph", replay)):
        print(f"{name:8} {h:16.1f} {w:16.1f}")
    print(f"rel error after replays {err:.4f}")
    ops.close_all(force=True)


if __name__ == "__main__":
    main()
