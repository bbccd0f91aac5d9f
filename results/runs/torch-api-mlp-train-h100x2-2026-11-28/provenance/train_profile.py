"""Where a training step of the tensor-parallel MLP layer spends its GPU time, ovl's beside torch's (torchrun).

The step of ``torch_api_tp_multigpu.py --op mlp-train`` (``torch.autograd.grad`` of the layer's output for ``x``,
``w_gate_up`` and ``w_down``), eager, on one side stream: a few warm steps, then ``--steps`` steps of each under
``torch.profiler``. Rank 0 prints, per shape and per side, every GPU activity (kernels, copies, NCCL) summed per
step and sorted by time (ovl's step also with the backward's ``wᵀ`` by torch's copy of the transposed view), the step's span on the GPU (first start to last end, over the profiled steps), the
sum of its activities (above the span where activities overlap) and the time nothing ran (the GPU waiting for
the host); ``--graph`` profiles replays of each side's step from a CUDA graph instead; with ``--trace DIR`` it writes each side's
Chrome trace there.

    OVL_KERNELS=out-kern-mlptrain torchrun --nproc_per_node=2 packages/bench/gpu/diag/train_profile.py --shapes MLP-1 [--graph]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
from collections import defaultdict
from pathlib import Path

import torch
import torch.distributed as dist
from ovl_runtime import autograd as ovl_autograd
from ovl_runtime.mlp import tp_mlp
from torch.profiler import ProfilerActivity, profile

HERE = Path(__file__).resolve().parent


def _bench():
    spec = importlib.util.spec_from_file_location("ovl_tp_bench", HERE.parent / "torch_api_tp_multigpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()


def _activities(prof, steps: int) -> tuple[list[tuple[str, int, float]], float, float, float]:
    """Per name: calls and ms per step; the span per step (ms), the summed activity per step (ms) and the time per
    step no activity ran (ms, gaps between the union of all activities)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    spans = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        span = e.time_range
        totals[e.name][0] += 1
        totals[e.name][1] += (span.end - span.start) / 1000
        spans.append((span.start, span.end))
    rows = sorted(((n, int(c / steps), ms / steps) for n, (c, ms) in totals.items()), key=lambda r: -r[2])
    if not spans:
        return rows, 0.0, 0.0, 0.0
    spans.sort()
    idle, reach = 0.0, spans[0][1]
    for start, end in spans[1:]:
        idle += max(0, start - reach)
        reach = max(reach, end)
    busy = sum(end - start for start, end in spans)
    return rows, (reach - spans[0][0]) / 1000 / steps, busy / 1000 / steps, idle / 1000 / steps


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="MLP-1")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--top", type=int, default=14)
    p.add_argument("--trace", default=None)
    p.add_argument("--graph", action="store_true", help="profile replays of each side's step from a CUDA graph instead")
    a = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    torch.cuda.set_stream(torch.cuda.Stream())
    group = dist.group.WORLD
    for name in a.shapes.split(","):
        tokens, hidden, inter = BENCH.SHAPES[name]
        per = inter // world
        g = torch.Generator(device="cuda").manual_seed(7)
        x = (torch.randn(tokens // world, hidden, device="cuda", generator=g) / 4).to(torch.bfloat16)
        w = (torch.randn(hidden, 2 * per, device="cuda", generator=g) / 32).to(torch.bfloat16)
        down = (torch.randn(per, hidden, device="cuda", generator=g) / 32).to(torch.bfloat16)
        cot = (torch.randn(tokens // world, hidden, device="cuda", generator=g) / 8).to(torch.bfloat16)
        leaves = [t.clone().requires_grad_(True) for t in (x, w, down)]

        def ovl(leaves=leaves, cot=cot):
            return torch.autograd.grad(tp_mlp(*leaves, group), leaves, cot)

        def unfused(leaves=leaves, cot=cot, cut=per):
            xl, wl, dl = leaves
            gu = BENCH._Gather.apply(xl) @ wl
            y = BENCH._Scatter.apply((torch.nn.functional.silu(gu[:, :cut]) * gu[:, cut:]) @ dl)
            return torch.autograd.grad(y, leaves, cot)

        def ovl_torch_copy(ovl=ovl):
            # The backward's wᵀ by torch's copy of the transposed view, as before the tiled transpose.
            tiled = ovl_autograd._t
            ovl_autograd._t = lambda w: w.transpose(-1, -2).contiguous()
            try:
                return ovl()
            finally:
                ovl_autograd._t = tiled

        sides = (("ovl", ovl), ("ovl, wᵀ by torch's copy", ovl_torch_copy), ("torch", unfused))
        if a.graph:
            # Replays of each step captured on this stream (where its eager calls ran, as the benchmark captures it).
            sides = (("ovl graph", BENCH.BASELINES.graphed(ovl, here=True)), ("torch graph", BENCH.BASELINES.graphed(unfused, here=True)))
        for label, fn in sides:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            dist.barrier()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(a.steps):
                    fn()
                torch.cuda.synchronize()
            dist.barrier()
            if rank != 0:
                continue
            rows, span, busy, idle = _activities(prof, a.steps)
            print(
                f"\n{name} {label}, world {world}, rank 0: span {span:.3f} ms a step, activities {busy:.3f} ms a step, "
                f"nothing running {idle:.3f} ms a step",
                flush=True,
            )
            print("| activity | calls a step | ms a step |")
            print("| --- | ---: | ---: |")
            for n, c, ms in rows[: a.top]:
                print(f"| {n[:90]} | {c} | {ms:.3f} |")
            rest = sum(ms for _, _, ms in rows[a.top :])
            print(f"| (the other {max(0, len(rows) - a.top)}) | | {rest:.3f} |", flush=True)
            if a.trace:
                Path(a.trace).mkdir(parents=True, exist_ok=True)
                prof.export_chrome_trace(
                    str(Path(a.trace) / f"{name}-{label.split(',')[0].replace(' ', '-')}{'-torch-copy' if ',' in label else ''}-rank0.json")
                )
    # Graphs that captured NCCL collectives must go before the process group does (its teardown waits on them).
    sides = fn = None
    gc.collect()
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
