"""Diagnostic: eager calls of a copy-engine operator after CUDA-graph replays of it, and under torch's profiler.

Under torchrun, each rank calls ``ovl.all_gather_matmul_silu_mul`` (copy-engine pushes, each followed by a signal
to the peer's slot) at MLP-1's per-rank shape of this world, timing every call on the host (enqueue to
``synchronize``) and checking the output against the fp32 result on the gathered rows:

1. eager calls (the driver's path: ``cuMemcpyAsync`` + ``cuStreamWriteValue32`` of the host's epoch);
2. one eager call under ``torch.profiler``;
3. a CUDA graph captured and replayed three times, then eager calls (the runner now: after a capture, signals
   are 4-byte copies of the device's epoch word);
4. three more replays, then eager calls with the driver's signals put back (the runner before: a signal writes
   the host's epoch, which the replays did not advance).

A call whose wait ran into its bound takes the bound (10 s) and leaves a wrong output.

    OVL_KERNELS=out-kern-mlp OVL_TARGET=h100 torchrun --nproc_per_node=2 packages/bench/gpu/diag/eager_after_replay.py
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from ovl_runtime import ops
from ovl_runtime.gpu_memops import DriverOps
from ovl_runtime.mlp import all_gather_matmul_silu_mul
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    group = dist.group.WORLD
    tokens, hidden, inter = 8192, 4096, 11008
    i = inter // world
    g = torch.Generator(device="cuda").manual_seed(3)
    xs = (torch.randn(world, tokens // world, hidden, device="cuda", generator=g) / 4).to(torch.bfloat16)
    w = (torch.randn(hidden, 2 * i, device="cuda", generator=g) / 32).to(torch.bfloat16)
    gu = xs.reshape(tokens, hidden).float() @ w.float()
    want = torch.nn.functional.silu(gu[:, :i]) * gu[:, i:]
    x = xs[rank].contiguous()

    def call(label: str, profiled: bool = False, fn=None) -> None:
        fn = fn or (lambda: all_gather_matmul_silu_mul(x, w, group))
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        if profiled:
            with profile(activities=[ProfilerActivity.CUDA]):
                out = fn()
                torch.cuda.synchronize()
        else:
            out = fn()
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        err = float((out.float() - want).norm() / want.norm())
        if rank == 0:
            print(f"| {label} | {ms:.1f} | {err:.1e} |", flush=True)

    if rank == 0:
        print(f"{torch.cuda.get_device_name()}, world {world}, torch {torch.__version__}")
        print("| call | host ms (enqueue to sync) | rel. error |")
        print("| --- | ---: | ---: |")
    for n in range(4):
        call(f"eager {n}")
    call("eager, profiled", profiled=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side):
        replayed = all_gather_matmul_silu_mul(x, w, group)
    torch.cuda.current_stream().wait_stream(side)
    for n in range(3):
        call(f"replay {n}", fn=lambda: (graph.replay(), replayed)[1])
    for n in range(3):
        call(f"eager {n} after the replays")
    for n in range(3):
        call(f"replay {n + 3}", fn=lambda: (graph.replay(), replayed)[1])
    for op in ops.operators():
        for s in op.ranks:
            s.driver = DriverOps.load()  # the runner before: literal epochs after a capture
    for n in range(2):
        call(f"eager {n} after the replays, driver signals (before)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
