"""Diagnostic: the ag-moe body's persistence against a non-persistent grid, at MoE-1…6 (world 8 per-rank
shapes) on one GPU, beside the vLLM-style fused-MoE kernel (``../fused_moe.py``).

The built-in body ``moe_gather_gemm`` loops ``for tile_id in tl.range(pid, num_tiles, NUM_SMS)``; launched
with a grid of ``G`` programs and ``NUM_SMS = G`` it is persistent at ``G`` = the SM count and
non-persistent (one tile per program, the hardware scheduling programs as SMs free up) at ``G`` = the
routing's worst-case tile count, or with k programs per SM (``kxSMs``); ``r128``: registers capped at 128
per thread (``maxnreg``), so two programs of 8 warps fit an SM. ``grouped``
(``moe_bodies/moe_gather_gemm_grouped.py``): the body with the tiles taken in groups of GROUP_M blocks
per n-block (fused_moe's order) instead of row-major. Every case is checked against fp32 (poisoned output) first; CUDA-event
medians with the L2 flushed, cases interleaved (``moe-compute.py``'s timer).

    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/diag/moe_persistence.py --out $OUT/moe-persistence.json
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
from pathlib import Path

import numpy as np
import torch
import triton
from ovl_runtime.moe import draw_routing
from ovl_runtime.moe_align import moe_align_block_size

HERE = Path(__file__).resolve().parent
GPU = HERE.parent
BODY = GPU.parents[1] / "tlx-emitter" / "kernels" / "moe_gather_gemm.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


part1 = _load("ovl_moe_compute", GPU / "moe-compute.py")
fused_moe = _load("ovl_bench_fused_moe", GPU / "fused_moe.py")
#: BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, register cap per thread (0: none)
TILES = [(128, 256, 64, 8, 4, 0), (128, 128, 64, 8, 3, 0), (128, 128, 64, 8, 3, 128), (64, 64, 32, 4, 3, 0), (64, 128, 64, 4, 4, 0)]
#: fused_moe configurations beside its own list: 128x128x64 w8 s3 in row-major order (GROUP_M 1).
FUSED = [(128, 128, 64, 1, 8, 3)]


def body_cases(mod, x, w, ids, sms, variant="body", grids=("persistent", "2xSMs", "one-tile")):
    T, k = ids.shape
    E, K, N = w.shape
    out = []
    for bm, bn, bk, warps, stages, maxnreg in TILES:
        tables = moe_align_block_size(ids, E, bm)
        tiles = (tables[0].numel() // bm) * triton.cdiv(N, bn)
        for grid, label in ((sms, "persistent"), (2 * sms, "2xSMs"), (4 * sms, "4xSMs"), (8 * sms, "8xSMs"), (tiles, "one-tile")):
            if label not in grids:
                continue
            c = torch.empty(T * k, N, device=x.device, dtype=x.dtype)
            fn = functools.partial(
                mod.moe_gather_gemm[(grid,)], x, w, c, *tables, T, N, K,
                TOP_K=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_SMS=grid, num_warps=warps, num_stages=stages,
                **({"maxnreg": maxnreg} if maxnreg else {}),
            )  # fmt: skip
            cap = f" r{maxnreg}" if maxnreg else ""
            out.append((f"{variant} {bm}x{bn}x{bk} w{warps} s{stages}{cap} {label}", fn, c))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--world", type=int, default=8)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--grids", default="persistent,2xSMs,one-tile")
    p.add_argument("--shapes", default="", help="comma-separated subset, e.g. MoE-2,MoE-5")
    p.add_argument("--tiles", default="", help="comma-separated subset of TILES by BMxBNxBK, e.g. 64x64x32")
    p.add_argument("--variants", default="body,grouped")
    args = p.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    mod = _load("ovl_moe_body", BODY)
    grouped = _load("ovl_moe_body_grouped", HERE / "moe_bodies" / "moe_gather_gemm_grouped.py")
    rows = []
    wanted = {x for x in args.shapes.split(",") if x}
    if args.tiles:
        TILES[:] = [t for t in TILES if f"{t[0]}x{t[1]}x{t[2]}" in args.tiles.split(",")]
    for name, S, H, inter, E, topk in part1.SHAPES:
        if wanted and name not in wanted:
            continue
        n = inter // args.world
        g = torch.Generator(device="cuda").manual_seed(0)
        x = (torch.randn(S, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
        w = (torch.randn(E, H, n, device="cuda", generator=g) / 8).to(torch.bfloat16)
        ids = torch.from_numpy(draw_routing(np.random.default_rng(1), S, topk, E)).cuda()
        want = part1.reference(x, w, ids)
        row = {"shape": name, "check": {}, "errors": {}}
        grids = args.grids.split(",")
        cases = body_cases(mod, x, w, ids, sms, grids=grids) if "body" in args.variants else []
        cases += body_cases(grouped, x, w, ids, sms, "grouped", grids=grids) if "grouped" in args.variants else []
        cases += fused_moe.cases(x, w, ids, a_div=topk, configs=[*FUSED, *fused_moe.CONFIGS[4:]])
        good = part1.checked(row, cases, want, 0.02)
        times = part1.time_cases(good, args.warmup, args.reps)
        row["cases"] = {k_: {"ms": v} for k_, v in times.items()}
        rows.append(row)
        print(f"{name}:", flush=True)
        for k_, v in sorted(times.items(), key=lambda kv: kv[1]):
            print(f"   {k_:44} {v:.4f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
