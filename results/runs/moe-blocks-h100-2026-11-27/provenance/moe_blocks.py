"""ag-moe's compute on one GPU at TileLink's MoE-1…6 per-rank shapes (world 8): the kernels ``ovl emit ag-moe``
writes, beside the vLLM-style fused-MoE kernel (``../fused_moe.py``) and ``torch._grouped_mm`` on pre-grouped rows.

Cases per shape: ``tuned emitted`` (the compiler's choice from the tuned table, ``--target h100``);
``persistent emitted`` (the persistent built-in body ``kernels/moe_gather_gemm.py`` at 128×256×64); per
configuration (BLOCK_M×BLOCK_N×BLOCK_K, GROUP_M, warps, stages) the non-persistent body
``kernels/moe_gather_gemm_blocks.py`` emitted (``blocks emitted``, what ``../moe_table.py`` picks the table's
entries from) and as written (``blocks``: no waits), and ``fused_moe``. Every emitted kernel runs with its chunk
slots already at the launch's target, so each wait passes at once. Every case is checked against fp32
(poisoned output) before it is timed; CUDA-event medians with the L2 flushed and the GPU held before each
launch, cases interleaved (``moe-compute.py``'s timer), ``--runs`` times over.

    node packages/bench/gpu/diag/moe_blocks_prepare.mjs out-moe-blocks        # where Node is (the repo built)
    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/diag/moe_blocks.py \\
        --emitted out-moe-blocks --out $OUT/moe-blocks.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import triton
from ovl_runtime.manifest import load_manifest
from ovl_runtime.moe import draw_routing
from ovl_runtime.moe_align import moe_align_block_size

from moe_bodies import _load, fused_moe, part1, part1_emitted_cases, without_wait_errors

HERE = Path(__file__).resolve().parent
routing_blocks = _load("ovl_moe_routing_blocks", HERE.parent / "moe_routing_blocks.py")
BLOCKS = HERE.parents[2] / "tlx-emitter" / "kernels" / "moe_gather_gemm_blocks.py"
#: BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, stages: fused_moe's list and 128×128×64 in row-major order.
CONFIGS = [*fused_moe.CONFIGS, (128, 128, 64, 1, 8, 3)]


def plain_cases(mod, x, w, ids):
    """The non-persistent body without waits at every configuration: (name, fn, c)."""
    T, k = ids.shape
    E, K, N = w.shape
    out = []
    for bm, bn, bk, gm, warps, stages in CONFIGS:
        tables = moe_align_block_size(ids, E, bm)
        max_blocks = tables[0].numel() // bm
        c = torch.empty(T * k, N, device=x.device, dtype=x.dtype)
        fn = functools.partial(
            mod.moe_gather_gemm_blocks[(max_blocks * triton.cdiv(N, bn),)], x, w, c, *tables, T, N, K, max_blocks,
            TOP_K=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages,
        )  # fmt: skip
        out.append((f"p1 blocks {fused_moe.config_name((bm, bn, bk, gm, warps, stages))}", fn, c))
    return out


def shape_inputs(shape, world: int):
    """A MoE shape's inputs as every MoE benchmark draws them: the routing (numpy, and on the GPU),
    X [S, H] and W [E, H, I/world] in bf16 (seeded), and the fp32 reference C."""
    _name, S, H, inter_all, E, topk = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    ids_np = draw_routing(np.random.default_rng(1), S, topk, E)
    ids = torch.from_numpy(ids_np).cuda()
    x = (torch.randn(S, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
    w = (torch.randn(E, H, inter_all // world, device="cuda", generator=g) / 8).to(torch.bfloat16)
    return ids_np, ids, x, w, part1.reference(x, w, ids)


def run_shape(shape, args, mod, sms):
    name, S, H, inter_all, E, topk = shape
    n = inter_all // args.world
    row = {"shape": name, "S": S, "H": H, "I_per_rank": n, "E": E, "topk": topk, "check": {}, "errors": {}, "runs": []}
    ids_np, ids, x, w, want = shape_inputs(shape, args.world)
    row["blocks"] = {str(bm): routing_blocks.blocks(ids_np, E, bm) for bm in sorted({c[0] for c in CONFIGS})}
    t0 = time.time()
    cases = plain_cases(mod, x, w, ids)
    cases += [(f"p1 {c}", fn, out) for c, fn, out in fused_moe.cases(x, w, ids, a_div=topk, configs=CONFIGS)]
    emitted = [(args.emitted / variant / name, None) for variant in ("tuned", "persistent", "blocks")]
    # The grid-stride variant at the tuned configuration: one program per SM, two, four, one per tile.
    loop = args.emitted / "loop" / name
    if loop.is_dir():
        cap = max(d.cap for m in loop.glob("*/manifest.json") for d in load_manifest(m).kernels[-1].grid)
        emitted += [(loop, programs) for programs in (sms, 2 * sms, 4 * sms, cap)]
    errs = []
    for folder, programs in emitted:
        for cname, fn, c, err in part1_emitted_cases(folder, x, w, ids, sms, programs=programs):
            cases.append((cname, fn, c))
            errs.append((cname, err))
    good = without_wait_errors(row, part1.checked(row, cases, want, args.tolerance), errs)
    grouped, _, gname = part1.grouped_cases(x, w, ids)
    good.append((f"p1 {gname}", grouped[0][1]))
    flops = 2 * S * topk * H * n
    for _ in range(args.runs):
        row["runs"].append(part1.time_cases(good, args.warmup, args.reps))
    medians = {c: statistics.median(r[c] for r in row["runs"]) for c in row["runs"][0]}
    row["cases"] = {c: {"ms": ms, "tflops": flops / ms / 1e9} for c, ms in medians.items()}
    print(f"  {name}: {len(row['cases'])} cases timed, {len(row['errors'])} failed, {time.time() - t0:.0f} s", flush=True)
    return row


def summary(rows) -> None:
    """Per shape: the fastest fused_moe, the persistent emitted default, the fastest non-persistent body
    emitted and plain, with each one's speed as a fraction of fused_moe's."""
    print(f"\n{'shape':6} {'case':44} {'ms':>8} {'fused/it':>9}")
    for r in rows:
        c = r["cases"]

        def best(prefix, c=c):
            names = [k for k in c if k.startswith(prefix)]
            return min(names, key=lambda k: c[k]["ms"]) if names else None

        ref = best("p1 fused_moe")
        for label in (
            "p1 fused_moe",
            "p1 tuned emitted",
            "p1 persistent emitted",
            "p1 blocks emitted",
            "p1 blocks 1",
            "p1 blocks 6",
            "p1 grouped_mm",
        ):
            k = best(label)
            if k is not None and ref is not None:
                print(f"{r['shape']:6} {k:44} {c[k]['ms']:8.4f} {c[ref]['ms'] / c[k]['ms']:9.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--emitted",
        type=Path,
        required=True,
        help="moe_blocks_prepare.mjs's folder (tuned|persistent/<MoE-n>/default, blocks/<MoE-n>/<config>)",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shapes", default="")
    p.add_argument("--world", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=0.02)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("moe_blocks.py needs a CUDA GPU")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    mod = _load("p1_blocks", BLOCKS)
    wanted = {s for s in args.shapes.split(",") if s}
    rows = []
    for shape in [s for s in part1.SHAPES if not wanted or s[0] in wanted]:
        print(f"{shape[0]}: S={shape[1]} H={shape[2]} I/W={shape[3] // args.world} E={shape[4]} top-{shape[5]}", flush=True)
        rows.append(run_shape(shape, args, mod, sms))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__}
        args.out.write_text(json.dumps({**meta, "rows": rows}, indent=1))
    summary(rows)


if __name__ == "__main__":
    main()
