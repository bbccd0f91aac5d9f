"""Diagnostic: where the host's time goes in an eager call of the torch API's GEMM+ReduceScatter under torchrun.

Each rank calls ``ops.matmul_reduce_scatter`` at MLP-1's per-rank shape of this world: a warm-up, then ``--calls``
calls back to back with no synchronisation between them, timed on the host (the time to enqueue them, and until
the GPU finished them), then again on rank 0 under cProfile; printed: the times per call and the functions that
take most of the profiled host time.

    OVL_KERNELS=out-kern-rs OVL_TARGET=h100 torchrun --nproc_per_node=2 packages/bench/gpu/diag/torch_api_host_profile.py
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch
import torch.distributed as dist
from ovl_runtime import ops


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    x = (torch.randn(8192, 11008 // world, device="cuda") / 8).to(torch.bfloat16)
    w = (torch.randn(11008 // world, 4096, device="cuda") / 8).to(torch.bfloat16)
    group = dist.group.WORLD
    for _ in range(5):
        ops.matmul_reduce_scatter(x, w, group)
    torch.cuda.synchronize()
    dist.barrier()
    # Without the profiler: the host's time to enqueue the calls, then until the GPU finished them.
    t0 = time.perf_counter()
    for _ in range(a.calls):
        ops.matmul_reduce_scatter(x, w, group)
    plain_host = (time.perf_counter() - t0) / a.calls * 1e3
    torch.cuda.synchronize()
    plain_wall = (time.perf_counter() - t0) / a.calls * 1e3
    dist.barrier()
    prof = cProfile.Profile() if rank == 0 else None
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    for _ in range(a.calls):
        ops.matmul_reduce_scatter(x, w, group)
    if prof is not None:
        prof.disable()
    host = (time.perf_counter() - t0) / a.calls * 1e3
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / a.calls * 1e3
    if rank == 0:
        print(f"world {world}: {plain_host:.3f} ms per call enqueued, {plain_wall:.3f} ms per call until the GPU finished")
        print(f"profiled: {host:.3f} ms per call enqueued, {wall:.3f} ms per call until the GPU finished")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(a.top)
        print(s.getvalue())
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(a.top)
        print(s.getvalue())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
