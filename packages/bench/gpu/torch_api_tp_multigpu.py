"""The torch API's tensor-parallel GEMM operators on several GPUs under torchrun, eager and replayed from a CUDA
graph, beside what a torch user writes (also eager and replayed), at MLP-1…6's per-rank shapes of this world:

- ``--op gemm-rs``: ``ovl_runtime.ops.matmul_reduce_scatter`` (SM pushes: its deliveries wait on the device, so a
  graph captures it) against ``torch.matmul`` then ``dist.reduce_scatter_tensor`` (cuBLAS, NCCL); per rank
  ``x [S, I/W]``, ``w [I/W, H]``;
- ``--op gemm-ar``: ``ovl_runtime.ops.matmul_all_reduce`` (the partitioned AllReduce over SM transfers: pushes
  of the partial rows beside the GEMM, then one kernel reducing the rank's slab into every rank's output; its
  last wait a kernel, so a graph captures it) against ``torch.matmul`` then ``dist.all_reduce``; per rank as
  ``gemm-rs``, the output ``[S, H]`` on every rank (a row-parallel layer's output without sequence parallelism);
- ``--op ag-gemm``: ``ovl_runtime.ops.all_gather_matmul`` (copy-engine pushes) against
  ``dist.all_gather_into_tensor`` then ``torch.matmul``; per rank ``x [S/W, H]``, ``w [H, I/W]``;
- ``--op a2a-gemm``: ``ovl_runtime.ops.all_to_all_matmul`` (copy-engine pushes, the GEMM waiting per arriving slab)
  against ``dist.all_to_all_single`` then ``torch.matmul``; per rank ``x [S, H]`` (slab q of ``S / W`` rows goes to
  rank q), ``w [H, I/W]``, the output ``received @ w`` ``[S, I/W]`` (expert-parallel style, AutoOverlap's A2A+GEMM);
- ``--op mlp``: the whole tensor-parallel MLP layer, ``ovl_runtime.mlp.tp_mlp`` (what ``nn.TensorParallelMLP``
  runs: AllGather + gate/up GEMM + SiLU-mul, then GEMM + ReduceScatter) against AllGather, the gate/up GEMM,
  ``silu(gate) * up``, the down GEMM and ReduceScatter; per rank ``x [S/W, H]``, ``w_gate_up [H, 2·I/W]``,
  ``w_down [I/W, H]``;
- ``--op mlp-train``: one training step of that layer, ``torch.autograd.grad`` of ``tp_mlp``'s output for ``x``,
  ``w_gate_up`` and ``w_down`` (ovl's backward: the input gradient by the dual overlapped operators, the gate/up
  product kept from the forward, the weight gradients reading the gathered operands the AllGather+GEMM kernels
  return; ``ovl_runtime.autograd``) against torch autograd
  through the same unfused layer, its AllGather and ReduceScatter being NCCL collectives whose backward is the
  other one (Megatron's sequence parallelism, without its overlap). Checked: the forward against fp32, and
  every gradient against the torch layer's.

Each shape is checked first: every rank draws every rank's ``x`` and ``w`` from the same seeds and compares its
output with the fp32 result. Times are CUDA-event medians per rank of ``--reps`` calls after ``--warmup``, each
call started after a barrier (``timer.py``'s events, as ``baselines.py`` times: the host's enqueue of an eager call
is on the timed path), the slowest rank's median reported; a graph replay is one call. ``mlp-train`` also times each side's step
ten at a time back to back (``timed(..., batch=10)``: as a training loop runs its steps, no barrier between them).

    python -m ovl_runtime kernels gemm-rs --world 4 --m 8192 --n 4096 --k 2752 --target h100 --into DIR   # per shape, where Node is
    OVL_KERNELS=DIR OVL_TARGET=h100 torchrun --nproc_per_node=4 packages/bench/gpu/torch_api_tp_multigpu.py --op gemm-rs --out rs.json
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import time
from pathlib import Path

import torch
import torch.distributed as dist
from ovl_runtime import ops
from ovl_runtime.ops import tp_mlp
from timer import graphed

HERE = Path(__file__).resolve().parent


def _baselines():
    spec = importlib.util.spec_from_file_location("ovl_baselines", HERE / "baselines.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: MLP-1…6: (tokens S, hidden H, intermediate I of all ranks); GEMM+RS's per-rank GEMM is S × H × I/W.
BASELINES = _baselines()
SHAPES = BASELINES.MLP


class _Gather(torch.autograd.Function):
    """``cat(x over ranks)`` by NCCL; its backward the ReduceScatter of the gradient."""

    @staticmethod
    def forward(ctx, x):
        out = x.new_empty(dist.get_world_size() * x.shape[0], *x.shape[1:])
        dist.all_gather_into_tensor(out, x.contiguous())
        return out

    @staticmethod
    def backward(ctx, g):
        out = g.new_empty(g.shape[0] // dist.get_world_size(), *g.shape[1:])
        dist.reduce_scatter_tensor(out, g.contiguous())
        return out


class _Scatter(torch.autograd.Function):
    """This rank's rows of ``Σ_ranks x`` by NCCL; its backward the AllGather of the gradient."""

    @staticmethod
    def forward(ctx, x):
        return _Gather.backward(ctx, x)

    @staticmethod
    def backward(ctx, g):
        return _Gather.forward(ctx, g)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--op", choices=("gemm-rs", "gemm-ar", "ag-gemm", "a2a-gemm", "mlp", "mlp-train"), default="gemm-rs")
    p.add_argument("--shapes", default="MLP-1,MLP-2,MLP-3,MLP-4,MLP-5,MLP-6")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    a = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    timed = BASELINES.timed
    group = dist.group.WORLD
    rows = []
    if a.op == "mlp-train":
        # Every call of the training step on one side stream, its capture too: autograd nodes keep the stream
        # current when they were made, and a node made on the legacy default stream before a capture makes the
        # capture fail (pytorch/pytorch#164302).
        torch.cuda.set_stream(torch.cuda.Stream())
    for name in a.shapes.split(","):
        TOKENS, H, inter = SHAPES[name]
        I = inter // world  # noqa: E741 - TileLink's name: the intermediate size per rank
        g = torch.Generator(device="cuda").manual_seed(7)
        if a.op in ("gemm-rs", "gemm-ar"):
            xs = (torch.randn(world, TOKENS, I, device="cuda", generator=g) / 8).to(torch.bfloat16)
            ws = (torch.randn(world, I, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
            want = sum(xs[q].float() @ ws[q].float() for q in range(world))
            if a.op == "gemm-rs":
                want = want[rank * TOKENS // world : (rank + 1) * TOKENS // world]
        elif a.op == "ag-gemm":
            xs = (torch.randn(world, TOKENS // world, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
            ws = (torch.randn(world, H, I, device="cuda", generator=g) / 8).to(torch.bfloat16)
            want = xs.reshape(TOKENS, H).float() @ ws[rank].float()
        elif a.op == "a2a-gemm":
            xs = (torch.randn(world, TOKENS, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
            ws = (torch.randn(world, H, I, device="cuda", generator=g) / 8).to(torch.bfloat16)
            # Slab q of rank r's x goes to rank q: rank r receives slab r of every rank, in rank order.
            slab = TOKENS // world
            want = torch.cat([xs[q, rank * slab : (rank + 1) * slab] for q in range(world)]).float() @ ws[rank].float()
        else:
            xs = (torch.randn(world, TOKENS // world, H, device="cuda", generator=g) / 4).to(torch.bfloat16)
            ws = (torch.randn(world, H, 2 * I, device="cuda", generator=g) / 32).to(torch.bfloat16)
            downs = (torch.randn(world, I, H, device="cuda", generator=g) / 32).to(torch.bfloat16)
            full = xs.reshape(TOKENS, H).float()
            want = torch.zeros(TOKENS // world, H, device="cuda")
            for q in range(world):
                gu = full[rank * TOKENS // world : (rank + 1) * TOKENS // world] @ ws[q].float()
                want += (torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]) @ downs[q].float()
            down = downs[rank].contiguous()
            del downs, full
        x, w = xs[rank].contiguous(), ws[rank].contiguous()
        fused = {
            "gemm-rs": ops.matmul_reduce_scatter,
            "gemm-ar": ops.matmul_all_reduce,
            "ag-gemm": ops.all_gather_matmul,
            "a2a-gemm": ops.all_to_all_matmul,
        }
        got = tp_mlp(x, w, down, group) if a.op.startswith("mlp") else fused[a.op](x, w, group)
        err = float((got.float() - want).norm() / want.norm())
        del xs, ws, want
        ok = torch.tensor([err], device="cuda")
        dist.all_reduce(ok, op=dist.ReduceOp.MAX)
        if a.op == "gemm-rs":
            c = torch.empty(TOKENS, H, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(TOKENS // world, H, device="cuda", dtype=torch.bfloat16)

            def ovl(x=x, w=w):
                return ops.matmul_reduce_scatter(x, w, group)

            def unfused(x=x, w=w, c=c, out=out):
                torch.matmul(x, w, out=c)
                dist.reduce_scatter_tensor(out, c)

        elif a.op == "gemm-ar":
            c = torch.empty(TOKENS, H, device="cuda", dtype=torch.bfloat16)

            def ovl(x=x, w=w):
                return ops.matmul_all_reduce(x, w, group)

            def unfused(x=x, w=w, c=c):
                torch.matmul(x, w, out=c)
                dist.all_reduce(c)

        elif a.op == "ag-gemm":
            gathered = torch.empty(TOKENS, H, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(TOKENS, I, device="cuda", dtype=torch.bfloat16)

            def ovl(x=x, w=w):
                return ops.all_gather_matmul(x, w, group)

            def unfused(x=x, w=w, c=c, gathered=gathered):
                dist.all_gather_into_tensor(gathered, x)
                torch.matmul(gathered, w, out=c)

        elif a.op == "a2a-gemm":
            received = torch.empty(TOKENS, H, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(TOKENS, I, device="cuda", dtype=torch.bfloat16)

            def ovl(x=x, w=w):
                return ops.all_to_all_matmul(x, w, group)

            def unfused(x=x, w=w, c=c, received=received):
                dist.all_to_all_single(received, x)
                torch.matmul(received, w, out=c)

        elif a.op == "mlp-train":
            leaves = [t.clone().requires_grad_(True) for t in (x, w, down)]
            cot = (torch.randn(TOKENS // world, H, device="cuda", generator=g) / 8).to(torch.bfloat16)

            def ovl(leaves=leaves, cot=cot):
                return torch.autograd.grad(tp_mlp(*leaves, group), leaves, cot)

            def unfused(leaves=leaves, cot=cot, cut=I):
                xl, wl, dl = leaves
                gu = _Gather.apply(xl) @ wl
                y = _Scatter.apply((torch.nn.functional.silu(gu[:, :cut]) * gu[:, cut:]) @ dl)
                return torch.autograd.grad(y, leaves, cot)

            grad_err = max(float((o.float() - u.float()).norm() / u.float().norm()) for o, u in zip(ovl(), unfused(), strict=True))
            worst = torch.tensor([grad_err], device="cuda")
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            grad_err = float(worst.item())
        else:
            gathered = torch.empty(TOKENS, H, device="cuda", dtype=torch.bfloat16)
            c = torch.empty(TOKENS, H, device="cuda", dtype=torch.bfloat16)
            out = torch.empty(TOKENS // world, H, device="cuda", dtype=torch.bfloat16)

            def ovl(x=x, w=w, down=down):
                return tp_mlp(x, w, down, group)

            def unfused(x=x, w=w, down=down, c=c, out=out, gathered=gathered, cut=I):
                dist.all_gather_into_tensor(gathered, x)
                gu = torch.matmul(gathered, w)
                torch.matmul(torch.nn.functional.silu(gu[:, :cut]) * gu[:, cut:], down, out=c)
                dist.reduce_scatter_tensor(out, c)

        times, stamps, replays = {}, {}, {}
        labels = (("ovl eager", ovl), ("cuBLAS + NCCL eager", unfused), ("cuBLAS + NCCL graph", unfused), ("ovl graph", ovl))
        for label, fn in labels:
            # Wall-clock start and end of each timing (to line up with a clock / power log taken beside the run).
            start = time.time()
            if label.endswith("graph") and a.op == "mlp-train":
                try:
                    replay = graphed(fn, here=True)
                except Exception as exc:  # noqa: BLE001 - reported, the eager figures stand
                    if rank == 0:
                        print(f"{name} {label}: capture failed: {str(exc).splitlines()[0]}", flush=True)
                    continue
            else:
                replay = graphed(fn) if label.endswith("graph") else fn
            times[label] = timed(replay, a.warmup, a.reps)
            stamps[label] = [round(start, 3), round(time.time(), 3)]
            replays[label] = replay
        if a.op == "mlp-train":
            # Steps back to back, as a training loop runs them (no barrier between steps), each side's ten at a time.
            for label in ("ovl eager", "cuBLAS + NCCL eager", "cuBLAS + NCCL graph", "ovl graph"):
                if label in replays:
                    times[f"{label}, back to back"] = timed(replays[label], a.warmup, a.reps // 3, batch=10)
        gemm = {"M": TOKENS, "N": H, "K": I} if a.op in ("gemm-rs", "gemm-ar") else {"M": TOKENS, "N": I, "K": H}
        if a.op.startswith("mlp"):
            gemm = {"S": TOKENS, "hidden": H, "intermediatePerRank": I}
        if a.op == "mlp-train":
            gemm["gradRelErrorVsTorch"] = grad_err
        rows.append({"op": a.op, "shape": name, **gemm, "maxRelError": float(ok.item()), **times, "wallClock": stamps})
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
    if rank == 0 and a.op == "mlp-train":
        print(f"{a.op}: {torch.cuda.get_device_name()}, world {world}, torch {torch.__version__}")
        print(
            "| shape | rel. error, forward / gradients vs torch | ovl eager | torch + NCCL eager | torch over ovl | ovl graph | torch + NCCL graph | graph over graph |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            og, tg = r.get("ovl graph"), r.get("cuBLAS + NCCL graph")
            graphs = f"{og:.3f} | {tg:.3f} | {tg / og:.2f}×" if og and tg else f"{og or '—'} | {tg or '—'} | —"
            print(
                f"| {r['shape']} | {r['maxRelError']:.1e} / {r['gradRelErrorVsTorch']:.1e} | {r['ovl eager']:.3f} | "
                f"{r['cuBLAS + NCCL eager']:.3f} | {r['cuBLAS + NCCL eager'] / r['ovl eager']:.2f}× | {graphs} |"
            )
        gm = statistics.geometric_mean(r["cuBLAS + NCCL eager"] / r["ovl eager"] for r in rows)
        print(f"geometric mean, eager over eager: {gm:.2f}×")
        both = [r for r in rows if r.get("ovl graph") and r.get("cuBLAS + NCCL graph")]
        if both:
            gm = statistics.geometric_mean(r["cuBLAS + NCCL graph"] / r["ovl graph"] for r in both)
            print(f"geometric mean, graph over graph ({len(both)} shapes): {gm:.2f}×")
        print("\nten steps back to back (ms a step):")
        print("| shape | ovl eager | torch + NCCL eager | torch over ovl | ovl graph | torch + NCCL graph | graph over graph |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            oe, te = r["ovl eager, back to back"], r["cuBLAS + NCCL eager, back to back"]
            og, tg = r.get("ovl graph, back to back"), r.get("cuBLAS + NCCL graph, back to back")
            graphs = f"{og:.3f} | {tg:.3f} | {tg / og:.2f}×" if og and tg else "— | — | —"
            print(f"| {r['shape']} | {oe:.3f} | {te:.3f} | {te / oe:.2f}× | {graphs} |")
        for side in ("eager", "graph"):
            pairs = [(r.get(f"cuBLAS + NCCL {side}, back to back"), r.get(f"ovl {side}, back to back")) for r in rows]
            pairs = [(t, o) for t, o in pairs if t and o]
            if pairs:
                print(f"geometric mean, {side} back to back: {statistics.geometric_mean(t / o for t, o in pairs):.2f}×")
    elif rank == 0:
        print(f"{a.op}: {torch.cuda.get_device_name()}, world {world}, torch {torch.__version__}")
        print("| shape | rel. error | ovl eager | ovl graph | torch + NCCL eager | torch + NCCL graph | graph over graph |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            print(
                f"| {r['shape']} | {r['maxRelError']:.1e} | {r['ovl eager']:.3f} | {r['ovl graph']:.3f} | "
                f"{r['cuBLAS + NCCL eager']:.3f} | {r['cuBLAS + NCCL graph']:.3f} | "
                f"{r['cuBLAS + NCCL graph'] / r['ovl graph']:.2f}× |"
            )
        gm = statistics.geometric_mean(r["cuBLAS + NCCL graph"] / r["ovl graph"] for r in rows)
        print(f"geometric mean, graph over graph: {gm:.2f}×")
    # Graphs that captured NCCL collectives must go before the process group does (its teardown waits on them).
    replay = replays = None
    gc.collect()
    torch.cuda.synchronize()
    if rank == 0:
        with open(a.out, "w") as fh:
            json.dump(
                {"op": a.op, "device": torch.cuda.get_device_name(), "world": world, "torch": torch.__version__, "rows": rows}, fh, indent=1
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
