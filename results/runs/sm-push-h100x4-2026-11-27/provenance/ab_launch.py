"""Diagnostic: several emitted manifests of one world timed launch by launch in turn, in one process (torchrun,
one process per GPU), so that machine drift falls on all of them alike. Each round launches every manifest once
(the slowest rank's time, between barriers); printed: each manifest's median over the rounds, and its ratio to the
first manifest's in the same round (median of the ratios).

    torchrun --nproc_per_node=4 packages/bench/gpu/diag/ab_launch.py A/manifest.json B/manifest.json [...] [--rounds 40]
"""

import os
import statistics
import sys

import torch
import torch.distributed as dist
import triton

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "..", "runtime-py", "src"))
from diag_rs import med
from ovl_runtime.gpu import _init_distributed
from ovl_runtime.gpu_session import GpuSession
from ovl_runtime.manifest import load_manifest


def main() -> None:
    args = sys.argv[1:]
    rounds = 40
    if "--rounds" in args:
        i = args.index("--rounds")
        rounds = int(args[i + 1])
        del args[i : i + 2]
    manifests = [load_manifest(p) for p in args]
    _init_distributed(manifests[0])
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sessions = [GpuSession(m, dist.get_rank(), sms) for m in manifests]
    for s in sessions:
        s.launch(warm=True)
        s.sync()
    for s in sessions:  # a few launches each before timing
        for _ in range(3):
            s.launch()
            s.sync()
    times = [[] for _ in sessions]
    for _ in range(rounds):
        for i, s in enumerate(sessions):
            times[i].append(med(lambda s=s: (s.launch(), s.sync()), reps=1, warm=0))
    for s in sessions:
        s.raise_wait_errors()
    if dist.get_rank() == 0:
        print(f"{torch.cuda.get_device_name()}, world {manifests[0].world}, {rounds} rounds", flush=True)
        print("| manifest | median (ms) | ÷ first, same round (median) |", flush=True)
        print("| --- | ---: | ---: |", flush=True)
        for m, t in zip(manifests, times, strict=True):
            ratio = statistics.median(a / b for a, b in zip(t, times[0], strict=True))
            print(f"| {m.name} ({args[manifests.index(m)].split('/')[-2]}) | {statistics.median(t):.3f} | {ratio:.3f} |", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
