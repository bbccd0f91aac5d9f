"""The MoE part 2 kernels of ovl's moe-rs on one GPU, beside PyTorch's grouped GEMM + scatter + topk-reduce.

At TileLink's MoE-1 … MoE-6 per-rank shapes of a world of 8 (S = 8192 tokens, hidden H 2048/4096,
intermediate I 1536/2048 of which a rank holds I/8, E 8/32 experts, top-k 2/5, bf16, a uniform random
routing and weights), on one rank's data (world 1: the rank reduces all S tokens of its own partial, the
same bytes a rank of 8 reads from its peers for its S/8 tokens):

- ``body``: ``ovl_runtime.moe_rs.moe_gemm_scatter`` (the weighted group GEMM writing each slot's row, then
  its per-slab notifies) at a few tile configurations, tables from the device;
- ``body+reduce``: the whole moe-rs launch (routing tables, slab targets, producer, TopK-reduce) through
  ``moe_rs_one_device``;
- ``grouped_mm``: ``torch._grouped_mm`` on rows already grouped by expert, and
  ``grouped_mm+scatter+topk-reduce``: the same with the gather into expert order, the scatter back to slot
  order, the weighting and the sum over each token's k slots (what moe-rs fuses), or a cuBLAS matmul
  per expert where ``torch._grouped_mm`` is missing or refuses the shape.

Every case is checked against an fp32 reference first (relative Frobenius error within ``--tolerance``).
Times are CUDA-event medians, the L2 flushed before each launch, cases interleaved (``moe-compute.py``'s
timer); TFLOP/s count 2·S·k·I/8·H.

    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/moe-rs-compute.py --out $OUT/moe-rs-compute.json
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

from ovl_runtime.moe import draw_routing
from ovl_runtime.moe_align import moe_align_block_size
from ovl_runtime.moe_rs import moe_gemm_scatter, moe_rs_one_device, moe_rs_reference_torch

HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


part1 = _load("ovl_moe_compute", HERE / "moe-compute.py")
SHAPES, rel, time_cases = part1.SHAPES, part1.rel, part1.time_cases
#: Producer configurations: BLOCK_M, BLOCK_N, BLOCK_K, warps, stages.
CONFIGS = [(64, 128, 64, 4, 3), (64, 64, 64, 4, 4), (128, 128, 64, 8, 3)]


def body_case(cfg, h, w2, ids, wts, sms):
    bm, bn, bk, warps, stages = cfg
    T, k = ids.shape
    E, inter, H = w2.shape
    partial = torch.full((T * k, H), float("nan"), device="cuda", dtype=h.dtype)
    sig = torch.zeros((T // 128,), dtype=torch.int32, device="cuda")
    sig_ptrs = torch.tensor([sig.data_ptr()], dtype=torch.int64, device="cuda")
    flat_w = wts.reshape(-1).float().contiguous()
    tables = moe_align_block_size(ids, E, bm)

    def run() -> None:
        s_ids, eob, nb = tables
        moe_gemm_scatter[(sms,)](
            h, w2, flat_w, partial, s_ids, eob, nb, sig_ptrs, H, inter, T * k, 128, T // 128,
            TOP_K=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_SMS=sms, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return f"body {bm}x{bn}x{bk} w{warps} s{stages}", run, partial


def baseline_cases(h, w2, ids, wts):
    T, k = ids.shape
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w2.shape[0]), 0).to(torch.int32)
    grouped = h[order].contiguous()
    ends = offs.tolist()

    def loop(a):
        res = torch.empty(a.shape[0], w2.shape[2], device="cuda", dtype=h.dtype)
        lo = 0
        for e, hi in enumerate(ends):
            if hi > lo:
                torch.matmul(a[lo:hi], w2[e], out=res[lo:hi])
            lo = hi
        return res

    gmm, name = getattr(torch, "_grouped_mm", None), "grouped_mm"
    mm = loop
    if gmm is not None:
        try:
            torch.testing.assert_close(gmm(grouped, w2, offs=offs).float(), loop(grouped).float(), rtol=2e-2, atol=2e-2)
            mm = lambda a: gmm(a, w2, offs=offs)  # noqa: E731
        except Exception as exc:  # noqa: BLE001 - a build or shape _grouped_mm refuses
            print(f"  torch._grouped_mm refused ({type(exc).__name__}: {exc}); a cuBLAS matmul per expert", flush=True)
            name = "matmul-per-expert"
    else:
        name = "matmul-per-expert"
    slots = torch.empty(T * k, w2.shape[2], device="cuda", dtype=h.dtype)
    result = {}

    def fused() -> None:
        slots[order] = mm(h[order])
        result["out"] = (slots.view(T, k, -1).float() * wts.float()[..., None]).sum(1).to(h.dtype)

    return [(name, lambda: mm(grouped)), (f"{name}+scatter+topk-reduce", fused)], result, name


def run_shape(shape, args, sms):
    name, S, H, inter_all, E, topk = shape
    inter = inter_all // args.world
    g = torch.Generator(device="cuda").manual_seed(0)
    h = (torch.randn(S * topk, inter, device="cuda", generator=g) / 8).to(torch.bfloat16)
    w2 = (torch.randn(E, inter, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
    ids = torch.from_numpy(draw_routing(np.random.default_rng(1), S, topk, E)).cuda()
    wts = torch.rand((S, topk), device="cuda", generator=g)
    want = moe_rs_reference_torch(h[None], w2[None], ids, wts)[0]
    want_slots = torch.zeros(S * topk, H, device="cuda")
    flat = ids.reshape(-1).long()
    for e in torch.unique(flat).tolist():
        sl = torch.nonzero(flat == e).squeeze(1)
        want_slots[sl] = (h[sl].float() @ w2[e].float()) * wts.reshape(-1)[sl, None]
    row = {"shape": name, "S": S, "H": H, "I_per_rank": inter, "E": E, "topk": topk, "cases": {}, "errors": {}, "check": {}}
    cases = []
    for cfg in CONFIGS:
        try:
            cname, fn, partial = body_case(cfg, h, w2, ids, wts, sms)
            fn()
            err = rel(partial, want_slots)
            if not err <= args.tolerance:
                raise RuntimeError(f"relative error {err:.3g} exceeds {args.tolerance}")
            row["check"][cname] = err
            cases.append((cname, fn))
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            row["errors"][f"body {cfg}"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
    state: dict = {}
    full = {}

    def pipeline() -> None:
        full["out"] = moe_rs_one_device(
            h[None], w2[None], ids, wts, slab_t=128, block_m=64, block_n=128, block_k=64, block_t=32,
            num_sms=sms - 4, reduce_programs=4, state=state, raise_timeouts=False,
        )[0]  # fmt: skip

    try:
        pipeline()
        torch.cuda.synchronize()
        err = rel(full["out"], want)
        if not err <= args.tolerance:
            raise RuntimeError(f"relative error {err:.3g} exceeds {args.tolerance}")
        row["check"]["body+reduce"] = err
        cases.append(("body+reduce", pipeline))
    except Exception as exc:  # noqa: BLE001
        row["errors"]["body+reduce"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    base, result, bname = baseline_cases(h, w2, ids, wts)
    base[1][1]()
    row["check"][base[1][0]] = rel(result["out"], want)
    times = time_cases([*cases, *base], args.warmup, args.reps)
    flops = 2 * S * topk * inter * H
    row["cases"] = {k: {"ms": v, "tflops": flops / v / 1e9} for k, v in times.items()}
    row["baseline"] = bname
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None, help="JSON results (default: $OUT/moe-rs-compute.json)")
    p.add_argument("--shapes", default="", help="comma-separated subset, e.g. MoE-1,MoE-4")
    p.add_argument("--world", type=int, default=8)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=0.02)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("moe-rs-compute.py needs a CUDA GPU")
    wanted = {s for s in args.shapes.split(",") if s}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape in [s for s in SHAPES if not wanted or s[0] in wanted]:
        print(f"{shape[0]}: S={shape[1]} H={shape[2]} I/W={shape[3] // args.world} E={shape[4]} top-{shape[5]}", flush=True)
        rows.append(run_shape(shape, args, sms))
        for k, v in rows[-1]["errors"].items():
            print(f"  FAILED {k}: {v}", flush=True)
    print(f"\n{'shape':7} {'best body':>26} {'ms':>8} {'TFLOP/s':>8} {'body+reduce':>11} {'grouped':>8} {'+scatter+reduce':>15}")
    for r in rows:
        c = r["cases"]
        bodies = {k: v for k, v in c.items() if k.startswith("body ")}
        if not bodies:
            continue
        best = min(bodies, key=lambda k: bodies[k]["ms"])
        nan = {"ms": float("nan")}
        print(
            f"{r['shape']:7} {best:>26} {bodies[best]['ms']:8.3f} {bodies[best]['tflops']:8.1f} {c.get('body+reduce', nan)['ms']:11.3f} "
            f"{c.get(r['baseline'], nan)['ms']:8.3f} {c.get(r['baseline'] + '+scatter+topk-reduce', nan)['ms']:15.3f}"
        )
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "world": args.world, "rows": rows}
    out = args.out or (Path(os.environ["OUT"]) / "moe-rs-compute.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
