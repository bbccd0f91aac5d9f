"""Diagnostic: the tensor-parallel MLP's two launches, each alone, at a small shape under torchrun.

At 128 rows per rank, hidden 256, intermediate 256 (world 2), ``tp_mlp`` returned a wrong forward on rank 0.
This runs each launch alone against fp32 results and reports the relative error of every 64-row block of the
output, over three calls, plus the gathered operand X as rank 0's symmetric buffer holds it after the gather:

1. ``all_gather_matmul_silu_mul`` (``ag-gemm-silu``) on each rank's rows;
2. ``matmul_reduce_scatter`` (``gemm-rs``) on a dense ``h``;
3. ``tp_mlp`` (both).

    OVL_KERNELS=out-kern-autograd torchrun --nproc_per_node=2 packages/bench/gpu/diag/tp_mlp_small.py
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ovl_runtime import ops
from ovl_runtime.mlp import all_gather_matmul_silu_mul, tp_mlp

ROWS, HID, INTER = 128, 256, 256


def blocks(out: torch.Tensor, want: torch.Tensor) -> str:
    errs = []
    for r in range(0, out.shape[0], 64):
        a, b = out[r : r + 64].float(), want[r : r + 64].float()
        errs.append(f"{float((a - b).norm() / b.norm()):.1e}")
    return " ".join(errs)


def main() -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    group = dist.group.WORLD
    gen = torch.Generator(device="cuda").manual_seed(5)

    def draw(*shape: int, scale: float) -> torch.Tensor:
        return (torch.randn(*shape, device="cuda", generator=gen) / scale).to(torch.bfloat16)

    xs, gus, downs = draw(world, ROWS, HID, scale=4), draw(world, HID, 2 * INTER, scale=16), draw(world, INTER, HID, scale=16)
    full = torch.cat(list(xs)).float()
    hs = []
    for r in range(world):
        gu = full @ gus[r].float()
        hs.append(torch.nn.functional.silu(gu[:, :INTER]) * gu[:, INTER:])
    ys = sum(hs[r].to(torch.bfloat16).float() @ downs[r].float() for r in range(world))
    mine = slice(rank * ROWS, (rank + 1) * ROWS)

    def report(label: str, out: torch.Tensor, want: torch.Tensor) -> None:
        torch.cuda.synchronize()
        line = f"rank {rank} {label}: block errors {blocks(out, want)}"
        for r in range(world):
            dist.barrier()
            if r == rank:
                print(line, flush=True)

    for n in range(3):
        h = all_gather_matmul_silu_mul(xs[rank].contiguous(), gus[rank].contiguous(), group)
        report(f"ag-gemm-silu call {n}", h, hs[rank])
    op = next(o for (d, _g), o in ops._operators.items() if d.startswith("ag-gemm-silu"))
    report("ag-gemm-silu gathered X", op.ranks[0].tensors["X"].view(world * ROWS, HID), full)
    for n in range(3):
        y = ops.matmul_reduce_scatter(hs[rank].to(torch.bfloat16).contiguous(), downs[rank].contiguous(), group)
        report(f"gemm-rs call {n}", y, ys[mine])
    for n in range(3):
        y = tp_mlp(xs[rank].contiguous(), gus[rank].contiguous(), downs[rank].contiguous(), group)
        report(f"tp_mlp call {n}", y, ys[mine])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
