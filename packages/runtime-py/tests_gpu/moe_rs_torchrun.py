"""moe-rs through the torch API under torchrun (one rank per GPU, symmetric memory): each rank draws every
rank's inputs from the same seeds, calls ``moe_ops.moe_grouped_matmul_reduce_scatter`` on its own slice and
checks its ``T/W`` rows against the torch reference of all ranks, for three calls with fresh inputs and a
routing with an expert left out. Exits non-zero on the first failure.

    torchrun --nproc_per_node=2 packages/runtime-py/tests_gpu/moe_rs_torchrun.py   # also 4 and 8

The kernels are the compiled ``moe-rs`` manifests of each case and world: on a machine with ovl's CLI,
``python -m ovl_runtime kernels moe-rs --world W --m T --n H --k I --experts E --topk k --into DIR``
for each case, then ``OVL_KERNELS=DIR`` here.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.distributed as dist

from ovl_runtime.operators.ag_moe.routing import draw_routing
from ovl_runtime.operators.moe_rs import api as moe_ops
from ovl_runtime.operators.moe_rs.kernels import moe_rs_reference_torch

#: (tokens T, I/W, H, experts, top-k, choices)
CASES = [(1024, 128, 512, 8, 2, None), (512, 192, 256, 32, 5, list(range(1, 32))), (256, 64, 384, 4, 1, [2])]


def main() -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    failures = 0
    for case, (T, inter, H, E, topk, choices) in enumerate(CASES):
        for step in range(3):
            g = torch.Generator(device="cuda").manual_seed(1000 * case + step)
            h = (torch.randn(world, T * topk, inter, device="cuda", generator=g) / 8).to(torch.bfloat16)
            w = (torch.randn(world, E, inter, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
            wts = torch.rand(T, topk, device="cuda", generator=g)
            ids = torch.from_numpy(draw_routing(np.random.default_rng(1000 * case + step), T, topk, E, choices)).cuda()
            y = moe_ops.moe_grouped_matmul_reduce_scatter(h[rank].contiguous(), ids, wts, w[rank].contiguous(), dist.group.WORLD)
            moe_ops.synchronize()
            want = moe_rs_reference_torch(h, w, ids, wts)[rank]
            err = ((y.float() - want).norm() / want.norm()).item()
            ok = y.shape == (T // world, H) and err < 0.01
            failures += not ok
            print(f"rank {rank}/{world} case {case} step {step}: rel {err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
