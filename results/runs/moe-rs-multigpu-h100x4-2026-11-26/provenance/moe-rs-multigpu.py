"""moe-rs on several GPUs under torchrun (one rank per GPU, symmetric memory), beside what a torch user runs.

At TileLink's MoE-1…6 (S 8192 tokens of all ranks, H 2048/4096, I 1536/2048 split over the ranks, E 8/32,
top-2/5, bf16, a uniform random routing) at this run's world, per prepared variant (``moe-rs-prepare.sh``'s
``multigpu/w<W>/<variant>/<MoE-n>``: ``ws``, the default warp-specialised body notified per launch with the
local TopK-sum; ``tile``, the per-tile-notify body whose owners pull every slot row), each manifest bound
through the torch API's ``BoundOperator`` on the default process group, and the torch baseline:
``torch._grouped_mm`` on each rank's rows grouped by expert, the scatter back to slot order, the weighting and
the top-k sum (in fp32, ``torch``, or in bf16, ``torch-bf16``), then NCCL's ``reduce_scatter_tensor``. Every case is checked first against the fp32 reference
of all ranks (each rank draws every rank's inputs from the same seeds); times are CUDA-event medians per rank
of ``--reps`` calls after ``--warmup``, the ranks aligned by a barrier before each call (``baselines.py``'s
timer); the table reports the slowest rank's median.

    bash packages/bench/gpu/moe-rs-prepare.sh out-moe          # where Node is
    torchrun --nproc_per_node=4 packages/bench/gpu/moe-rs-multigpu.py out-moe/multigpu --out $OUT/moe-rs-w4.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ovl_runtime._runner.bound import BoundOperator
from ovl_runtime.groups import resolve_group
from ovl_runtime._manifest.parse import load_manifest
from ovl_runtime.operators.ag_moe.routing import draw_routing
from ovl_runtime.operators.moe_rs.kernels import moe_rs_reference_torch

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SHAPES = _load("ovl_moe_compute", HERE / "moe-compute.py").SHAPES
# The group's timer: CUDA events around each call after a barrier, the slowest rank's median.
timed = _load("ovl_baselines", HERE / "baselines.py").timed


def torch_baseline(h, w, ids, wts, world, fp32: bool = True):
    """The unfused operator a torch user writes: grouped GEMM, scatter, weighting, top-k sum, NCCL ReduceScatter
    (the weighting and the sum in fp32, as ``moe-rs-compute.py``'s baseline, or in bf16: less traffic)."""
    T, k = ids.shape
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w.shape[0]), 0).to(torch.int32)
    out = torch.empty(T // world, w.shape[2], device=h.device, dtype=h.dtype)
    slots = torch.empty(T * k, w.shape[2], device=h.device, dtype=h.dtype)

    def run() -> torch.Tensor:
        slots[order] = torch._grouped_mm(h[order], w, offs=offs)
        if fp32:
            partial = (slots.view(T, k, -1).float() * wts.float()[..., None]).sum(1).to(h.dtype)
        else:
            partial = (slots.view(T, k, -1) * wts.to(h.dtype)[..., None]).sum(1)
        dist.reduce_scatter_tensor(out, partial)
        return out

    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="moe-rs-prepare.sh's multigpu/ folder (w<W>/<variant>/<MoE-n>/manifest.json)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--shapes", default="", help="comma-separated subset, e.g. MoE-1,MoE-6")
    p.add_argument("--variants", default="", help="comma-separated subset of the prepared variants, e.g. ws")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    group = resolve_group(dist.group.WORLD)
    wanted = {s for s in args.shapes.split(",") if s}
    only = {v for v in args.variants.split(",") if v}
    variants = sorted(d.name for d in (args.folder / f"w{world}").iterdir() if d.is_dir() and (not only or d.name in only))
    rows, failed = [], False
    for name, S, H, inter_all, E, k in [s for s in SHAPES if not wanted or s[0] in wanted]:
        inter = inter_all // world
        g = torch.Generator(device="cuda").manual_seed(7)
        h = (torch.randn(world, S * k, inter, device="cuda", generator=g) / 8).to(torch.bfloat16)
        w = (torch.randn(world, E, inter, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
        wts = torch.rand(S, k, device="cuda", generator=g)
        ids = torch.from_numpy(draw_routing(np.random.default_rng(7), S, k, E)).cuda()
        want = moe_rs_reference_torch(h, w, ids, wts)[rank]
        mine_h, mine_w = h[rank].contiguous(), w[rank].contiguous()
        del h, w
        row = {"shape": name, "S": S, "H": H, "I_per_rank": inter, "E": E, "topk": k, "ms": {}, "rel": {}, "errors": {}}
        cases = {}
        for v in variants:
            try:
                op = BoundOperator(load_manifest(args.folder / f"w{world}" / v / name / "manifest.json"), group)
                out = torch.empty(S // world, H, device="cuda", dtype=torch.bfloat16)
                inputs = [{"A": mine_h, "B": mine_w, "topk": ids, "weights": wts}]

                def call(op=op, out=out, inputs=inputs) -> torch.Tensor:
                    op.run(inputs, [out])
                    return out

                cases[v] = (call, op)
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                row["errors"][v] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
        cases["torch"] = (torch_baseline(mine_h, mine_w, ids, wts, world), None)
        cases["torch-bf16"] = (torch_baseline(mine_h, mine_w, ids, wts, world, fp32=False), None)
        for v, (fn, op) in cases.items():
            try:
                got = fn()
                if op is not None:
                    op.check()
                torch.cuda.synchronize()
                rel = ((got.float() - want).norm() / want.norm()).item()
                row["rel"][v] = rel
                if not rel < 2e-2:
                    raise RuntimeError(f"relative error {rel:.3g}")
                row["ms"][v] = timed(fn, args.warmup, args.reps)
                if op is not None:
                    op.check()
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on
                row["errors"][v] = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
        for _, op in cases.values():
            if op is not None:
                op.close()
        every = [None] * world
        dist.all_gather_object(every, row)
        if rank == 0:
            merged = dict(row)
            merged["ms"] = {v: max(r["ms"].get(v, float("nan")) for r in every) for v in cases}
            merged["rel"] = {v: max(r["rel"].get(v, float("nan")) for r in every) for v in cases}
            merged["errors"] = {f"rank {i} {v}": e for i, r in enumerate(every) for v, e in r["errors"].items()}
            rows.append(merged)
            failed |= bool(merged["errors"])
            print(f"{name}: " + "  ".join(f"{v} {merged['ms'][v]:.3f} ms" for v in cases), flush=True)
    if rank == 0:
        names = [*variants, "torch", "torch-bf16"]
        print(f"\nworld {world} ({torch.cuda.get_device_name(0)}): slowest rank's median ms, torch ÷ variant")
        print("shape  " + "  ".join(f"{v:>16}" for v in names))
        for r in rows:
            t = r["ms"]["torch"]
            print(f"{r['shape']:6} " + "  ".join(f"{r['ms'][v]:8.3f} ({t / r['ms'][v]:4.2f})" for v in names))
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(
                json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "world": world, "rows": rows}, indent=1)
            )
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
