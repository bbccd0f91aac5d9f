"""The torch API's backward passes under torchrun (one rank per GPU, symmetric memory, NCCL for the gradients'
collectives): each rank draws every rank's inputs and the cotangents from shared seeds, trains one step through
each GEMM operator, the tensor-parallel MLP layer, causal attention and both MoE operators on its own slice, and
checks its output and gradients against fp32 dense autograd over all ranks. Exits non-zero if any case fails.

    OVL_KERNELS=DIR torchrun --nproc_per_node=2 packages/runtime-py/tests_gpu/autograd_torchrun.py

The kernels are those of ``test_autograd_gpu.py`` (``python tests_gpu/test_autograd_gpu.py --prepare DIR``).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from support import by_slot

from ovl_runtime import ops
from ovl_runtime.operators.ag_moe.routing import draw_routing
from ovl_runtime.ops import moe_grouped_matmul_reduce_scatter, tp_mlp

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

    # Sequence-parallel attention, MHA causal (test_autograd_gpu.py's first attention shape): q [s, H, D] and
    # kv [s, 2, H, D] per rank.
    seq, heads, d = 1024, 4, 64
    s = seq // world
    qs, kvs = draw(world, s, heads, d, scale=1), draw(world, s, 2, heads, d, scale=1)

    def dense_attention(Q, KV, r):
        keys = torch.cat(list(KV))
        scores = Q[r].transpose(0, 1) @ keys[:, 0].transpose(0, 1).transpose(1, 2) / d**0.5  # [H, s, S]
        later = torch.arange(seq, device="cuda")[None, :] > (r * s + torch.arange(s, device="cuda"))[:, None]
        return (torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1) @ keys[:, 1].transpose(0, 1)).transpose(0, 1)

    cases.append(
        (
            "sequence_parallel_attention",
            lambda q, kv: ops.sequence_parallel_attention(q, kv, group, causal=True),
            dense_attention,
            [qs, kvs],
            draw(world, s, heads, d, scale=1).float(),
        )
    )
    # Both MoE operators on one routing (every rank's copy the same; expert 0 gets no token).
    experts, topk = 8, 2
    ids = torch.from_numpy(draw_routing(np.random.default_rng(3), M, topk, experts, range(1, experts))).cuda()
    ids = ids.expand(world, M, topk).contiguous()
    xs, ws = draw(world, slab, K), draw(world, experts, K, N)
    cases.append(
        (
            "moe_all_gather_grouped_matmul",
            lambda x, i, w: ops.moe_all_gather_grouped_matmul(x, i, w, group),
            lambda X, _I, Wt, r: by_slot(ids[0], lambda e, sl: torch.cat(list(X))[sl // topk] @ Wt[r, e]),
            [xs, ids, ws],
            draw(world, M * topk, N, scale=1).float(),
        )
    )
    hs, ws = draw(world, M * topk, INTER), draw(world, experts, INTER, HID)
    wts = torch.rand(M, topk, device="cuda", generator=gen).expand(world, M, topk).contiguous()

    def dense_moe_rs(H, _I, WT, Wt, r):
        total = sum(
            (by_slot(ids[0], lambda e, sl, q=q: H[q, sl] @ Wt[q, e]).view(M, topk, HID) * WT[q, :, :, None]).sum(1) for q in range(world)
        )
        return total[r * slab : (r + 1) * slab]

    cases.append(
        (
            "moe_grouped_matmul_reduce_scatter",
            lambda h, i, wt, w: moe_grouped_matmul_reduce_scatter(h, i, wt, w, group),
            dense_moe_rs,
            [hs, ids, wts, ws],
            draw(world, slab, HID, scale=1).float(),
        )
    )

    only = [c for c in os.environ.get("OVL_CASES", "").split(",") if c]  # run only these cases, in this order
    if only:
        cases = [next(c for c in cases if c[0] == name) for name in only]
    failures = 0
    for name, op, dense, every, cots in cases:
        with torch.no_grad():
            plain = op(*[t[rank].clone() for t in every])
        mine = [t[rank].clone().requires_grad_(t.is_floating_point()) for t in every]  # the routing's ids get none
        out = op(*mine)
        ops.synchronize(group)
        fwd = out.detach().clone()
        (out.float() * cots[rank]).sum().backward()
        ops.synchronize(group)
        # The model's loss is the sum of every rank's: rank r's output read with rank r's cotangent.
        full = [t.float().requires_grad_(True) if t.is_floating_point() else t for t in every]
        outs = [dense(*full, r) for r in range(world)]
        sum((o * c).sum() for o, c in zip(outs, cots, strict=True)).backward()
        errs = [rel(plain, outs[rank]), rel(fwd, outs[rank]), rel(out, outs[rank])]
        errs += [rel(m.grad, f.grad[rank]) for m, f in zip(mine, full, strict=True) if m.is_floating_point()]
        ok = max(errs) < 0.03
        line = f"rank {rank} {name}: output without grad, with grad, after backward, gradients: rel. error {', '.join(f'{e:.1e}' for e in errs)}"
        print(("ok   " if ok else "FAIL ") + line, flush=True)
        failures += not ok
    dist.destroy_process_group()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
