"""The torch API's backward passes under torchrun (one rank per GPU, symmetric memory, NCCL for the weight
gradients' gathers): each rank draws every rank's inputs and the cotangents from shared seeds, trains one step
through each GEMM operator and the tensor-parallel MLP layer on its own slice, and checks its output and
gradients against fp32 dense autograd over all ranks. Exits non-zero on the first failure.

    OVL_KERNELS=DIR torchrun --nproc_per_node=2 packages/runtime-py/tests_gpu/autograd_torchrun.py

The kernels are those of ``test_autograd_gpu.py`` (``python tests_gpu/test_autograd_gpu.py --prepare DIR``).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from ovl_runtime import ops
from ovl_runtime.mlp import tp_mlp

M, K, N = 256, 512, 256  # rows of all ranks, depth, columns (test_autograd_gpu.py's)
HID, INTER = 256, 256


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().float(), b.detach().float()
    return float((a - b).norm() / b.norm())


def main() -> None:
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    group = dist.group.WORLD
    gen = torch.Generator(device="cuda").manual_seed(5)

    def draw(*shape: int, scale: float = 8) -> torch.Tensor:
        return (torch.randn(*shape, device="cuda", generator=gen) / scale).to(torch.bfloat16)

    slab = M // world
    cases = []
    # (name, the operator on this rank's slices, the dense model over all ranks' tensors -> rank r's output,
    #  every rank's inputs [world, ...], every rank's cotangent of its output [world, ...])
    xs, ws = draw(world, slab, K), draw(world, K, N)
    cases.append(
        (
            "all_gather_matmul",
            lambda x, w: ops.all_gather_matmul(x, w, group),
            lambda X, Wt, r: torch.cat(list(X)) @ Wt[r],
            [xs, ws],
            draw(world, M, N, scale=1).float(),
        )
    )
    xs, ws = draw(world, M, K), draw(world, K, N)
    cases.append(
        (
            "matmul_reduce_scatter",
            lambda x, w: ops.matmul_reduce_scatter(x, w, group),
            lambda X, Wt, r: sum(X[q] @ Wt[q] for q in range(world))[r * slab : (r + 1) * slab],
            [xs, ws],
            draw(world, slab, N, scale=1).float(),
        )
    )
    xs, ws = draw(world, M, K), draw(world, K, N)
    cases.append(
        (
            "all_to_all_matmul",
            lambda x, w: ops.all_to_all_matmul(x, w, group),
            lambda X, Wt, r: torch.cat([X[q, r * slab : (r + 1) * slab] for q in range(world)]) @ Wt[r],
            [xs, ws],
            draw(world, M, N, scale=1).float(),
        )
    )
    xs, gus, downs = draw(world, slab, HID, scale=4), draw(world, HID, 2 * INTER, scale=16), draw(world, INTER, HID, scale=16)

    def dense_mlp(X, GU, D, r):
        full = torch.cat(list(X))
        total = 0
        for q in range(world):
            gu = full @ GU[q]
            total = total + (torch.nn.functional.silu(gu[:, :INTER]) * gu[:, INTER:]) @ D[q]
        return total[r * slab : (r + 1) * slab]

    cases.append(("tp_mlp", lambda x, a, b: tp_mlp(x, a, b, group), dense_mlp, [xs, gus, downs], draw(world, slab, HID, scale=1).float()))

    only = [c for c in os.environ.get("OVL_CASES", "").split(",") if c]  # run only these cases, in this order
    if only:
        cases = [next(c for c in cases if c[0] == name) for name in only]
    failures = 0
    for name, op, dense, every, cots in cases:
        with torch.no_grad():
            plain = op(*[t[rank].clone() for t in every])
        mine = [t[rank].clone().requires_grad_(True) for t in every]
        out = op(*mine)
        ops.synchronize(group)
        fwd = out.detach().clone()
        (out.float() * cots[rank]).sum().backward()
        ops.synchronize(group)
        # The model's loss is the sum of every rank's: rank r's output read with rank r's cotangent.
        full = [t.float().requires_grad_(True) for t in every]
        outs = [dense(*full, r) for r in range(world)]
        sum((o * c).sum() for o, c in zip(outs, cots, strict=True)).backward()
        errs = [rel(plain, outs[rank]), rel(fwd, outs[rank]), rel(out, outs[rank])]
        errs += [rel(m.grad, f.grad[rank]) for m, f in zip(mine, full, strict=True)]
        ok = max(errs) < 0.03
        line = f"rank {rank} {name}: output without grad, with grad, after backward, gradients: rel. error {', '.join(f'{e:.1e}' for e in errs)}"
        print(("ok   " if ok else "FAIL ") + line, flush=True)
        failures += not ok
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
