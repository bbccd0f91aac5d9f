"""The compute body of ovl's compiled moe-rs on one GPU, beside PyTorch's grouped GEMM + scatter + topk-reduce.

At TileLink's MoE-1 … MoE-6 per-rank shapes of a world of 8 (S = 8192 tokens, hidden H 2048/4096,
intermediate I 1536/2048 of which a rank holds I/8, E 8/32 experts, top-k 2/5, bf16, a uniform random
routing and weights), on one rank's data:

- ``emitted``: the producer ``ovl emit moe-rs`` compiled, one case per prepared folder
  (``moe-rs-prepare.sh``: ``ws-*`` the default warp-specialised body, which reads h in the routing's
  block order and takes no notifies; ``tile-*`` the ``moe_gemm_scatter`` body with the compiler's
  notifies of every covered slab on its owner, here all owners' signal slots on this GPU), routing
  tables from the device;
- ``plain``: a per-tile body as written (``kernels/moe_gemm_scatter.py``, no notifies), at the same tile;
  ``emitted+permute+topksum+notify``: a warp-specialised producer after ``moe_permute_rows`` (h into
  block order) and before ``moe_topk_sum`` (each token's k rows summed locally) and ``moe_slab_notify``
  (the launch's notify), as the manifest's compute stream runs them up to the owners' pulls;
- ``grouped_mm``: ``torch._grouped_mm`` on rows already grouped by expert, and
  ``grouped_mm+scatter+topk-reduce``: the same with the gather into expert order, the scatter back to slot
  order, the weighting and the sum over each token's k slots (what moe-rs fuses), or a cuBLAS matmul
  per expert where ``torch._grouped_mm`` is missing or refuses the shape;
- ``fused_moe``: a vLLM-style fused-MoE Triton kernel (``fused_moe.py``: each slot's row of h times its
  expert's weights, scaled by the slot's routing weight, stored in slot order) at each of its
  configurations, and ``fused_moe+topk-sum``: the same followed by the sum over each token's k slots
  (vLLM's ``moe_sum``, here ``torch.sum``); the summary takes the fastest of each.

Every case is checked against an fp32 reference first (relative Frobenius error within ``--tolerance``).
Times are CUDA-event medians, the L2 flushed before each launch, cases interleaved (``moe-compute.py``'s
timer); TFLOP/s count 2·S·k·I/8·H.

    bash packages/bench/gpu/moe-rs-prepare.sh out-moe        # where Node is
    PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps python3 packages/bench/gpu/moe-rs-compute.py \
        --emitted out-moe --out $OUT/moe-rs-compute.json
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
import triton

from ovl_runtime._manifest.parse import load_manifest
from ovl_runtime.operators.ag_moe.routing import draw_routing
from ovl_runtime.operators.ag_moe.routing_kernels import moe_align_block_size
from ovl_runtime.operators.moe_rs.kernels import moe_rs_reference_torch

HERE = Path(__file__).resolve().parent
PLAIN_BODY = HERE.parents[1] / "tlx-emitter" / "kernels" / "moe_gemm_scatter.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


part1 = _load("ovl_moe_compute", HERE / "moe-compute.py")
SHAPES, rel, time_cases = part1.SHAPES, part1.rel, part1.time_cases


def _args(kern, buffers, partial, sig_ptrs, sms, skip_inserted=False):
    """A manifest kernel's arguments from this run's tensors (``num-programs``: the SM count)."""
    args = {}
    for name, a in kern.args:
        if skip_inserted and name.startswith("ovl_"):
            continue
        if a.kind == "buffer":
            args[name] = partial if a.name == "moe_partial" else buffers[a.name]
        elif a.kind == "peer-pointers":
            args[name] = sig_ptrs
        elif a.kind == "rank":
            args[name] = 0
        elif a.kind == "num-programs":
            args[name] = sms
        elif a.kind == "int":
            args[name] = a.value
        else:
            raise ValueError(f"{kern.name}: argument {name} of kind {a.kind}")
    args.update(kern.constexprs)
    if "NUM_SMS" in args:
        args["NUM_SMS"] = sms
    return args


#: The runner kernels around a warp-specialised producer on the compute stream: the one before, the two after.
LAUNCH_NEIGHBOURS = ("moe-permute-rows", "moe-topk-sum", "moe-slab-notify")


def _step(kern, mod, buffers, partial, sig_ptrs, sms):
    """One runner kernel of the manifest as a launch: (jit function, arguments, grid, warps, stages)."""
    return (getattr(mod, kern.entry), _args(kern, buffers, partial, sig_ptrs, sms), tuple(kern.grid), kern.num_warps, 1)


def _launch(steps) -> None:
    for f, a, grid, warps, stages in steps:
        f[grid](**a, num_warps=warps, num_stages=stages)


def body_cases(folder: Path, h, w2, ids, wts, sms):
    """Per prepared folder of the shape (a tile or a body): the emitted producer and the plain body at its
    launch configuration; a warp-specialised producer (one notify per launch, h read in block order) also
    with its compute-stream neighbours, ``moe_permute_rows`` before and ``moe_slab_notify`` after it."""
    T, k = ids.shape
    out = []
    for mdir in sorted(p for p in folder.iterdir() if (p / "manifest.json").exists()):
        m = load_manifest(mdir / "manifest.json")
        kern = next(x for x in m.kernels if x.template_kind == "local-producer")
        p = kern.template_params
        bm = int(p["BLOCK_M"])
        E = int(p["experts"])
        if (int(p["tokens"]), int(p["topk"]), E, int(p["N"]), int(p["K"])) != (
            T,
            k,
            w2.shape[0],
            w2.shape[2],
            w2.shape[1],
        ):
            raise ValueError(f"{mdir}: compiled for another shape ({p})")
        sig = torch.zeros((m.signals.slots,), dtype=torch.int32, device=h.device)
        sig_ptrs = torch.tensor([sig.data_ptr()] * m.world, dtype=torch.int64, device=h.device)
        flat_w = wts.reshape(-1).float().contiguous()
        tables = moe_align_block_size(ids, E, bm)
        h_blocks = torch.zeros((tables[0].numel(), h.shape[1]), device=h.device, dtype=h.dtype)
        partial_tok = torch.empty((T, w2.shape[2]), device=h.device, dtype=h.dtype)
        buffers = {
            "moe_h": h, "moe_w2": w2, "moe_topk_weights": flat_w, "moe_h_blocks": h_blocks, "moe_partial_tok": partial_tok,
            "moe_sorted_token_ids": tables[0], "moe_expert_of_block": tables[1], "moe_num_blocks": tables[2],
        }  # fmt: skip
        launch = p.get("notifies") == "launch"
        cfg = f"{mdir.name} w{kern.num_warps} s{kern.num_stages}"
        runner = {x.template_kind: x for x in m.kernels}
        mod = _load(f"moe_rs_{mdir.name}_runner", mdir / runner["moe-topk-reduce-rs"].source)
        for kind in ("emitted", "emitted+permute+topksum+notify") if launch else ("emitted", "plain"):
            partial = torch.full((T * k, w2.shape[2]), float("nan"), device=h.device, dtype=h.dtype)
            args = _args(kern, buffers, partial, sig_ptrs, sms, skip_inserted=kind == "plain")
            fn = _load(
                f"moe_rs_{mdir.name}_{kind}",
                mdir / kern.source if kind != "plain" else PLAIN_BODY,
            )
            jit = getattr(fn, kern.entry)
            steps = [(jit, args, (sms,), kern.num_warps, kern.num_stages)]
            if launch:
                around = [_step(runner[x], mod, buffers, partial, sig_ptrs, sms) for x in LAUNCH_NEIGHBOURS]
                # The producer reads h_blocks: fill it once with the runner's own permute (timed only with it).
                _launch(around[:1])
                if kind != "emitted":
                    steps = [around[0], *steps, *around[1:]]

            # `sig` rides along: the kernels reach it only through the raw pointers of `sig_ptrs`.
            def run(steps=steps, sig=sig) -> None:  # noqa: ARG001
                _launch(steps)

            out.append((f"{kind} {cfg}", run, partial))
    return out


def baseline_cases(h, w2, ids, wts):
    T, k = ids.shape
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    offs = torch.cumsum(torch.bincount(flat, minlength=w2.shape[0]), 0).to(torch.int32)
    grouped = h[order].contiguous()
    mm, name = part1.grouped_matmul(w2, offs, grouped)
    slots = torch.empty(T * k, w2.shape[2], device=h.device, dtype=h.dtype)
    result = {}

    def fused() -> None:
        slots[order] = mm(h[order])
        result["out"] = (slots.view(T, k, -1).float() * wts.float()[..., None]).sum(1).to(h.dtype)

    return (
        [(name, lambda: mm(grouped)), (f"{name}+scatter+topk-reduce", fused)],
        result,
        name,
    )


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
    row = {
        "shape": name,
        "S": S,
        "H": H,
        "I_per_rank": inter,
        "E": E,
        "topk": topk,
        "cases": {},
        "errors": {},
        "check": {},
    }
    cases = []
    try:
        found = body_cases(args.emitted / name, h, w2, ids, wts, sms)
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        found = []
        row["errors"]["prepare"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    for cname, fn, partial in found:
        try:
            fn()
            err = rel(partial, want_slots)
            if not err <= args.tolerance:
                raise RuntimeError(f"relative error {err:.3g} exceeds {args.tolerance}")
            row["check"][cname] = err
            cases.append((cname, fn))
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            row["errors"][cname] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
    fused = part1.load_module(part1.FUSED_MOE, "ovl_bench_fused_moe")
    found = fused.cases(h, w2, ids, a_div=1, weights=wts)
    cases += part1.checked(row, found, want_slots, args.tolerance)
    summed = torch.empty(S, H, device="cuda", dtype=h.dtype)

    def with_sum(fn, c):
        def run() -> None:
            fn()
            torch.sum(c.view(S, topk, H), dim=1, out=summed)

        return run

    cases += part1.checked(row, [(f"{n}+topk-sum", with_sum(fn, c), summed) for n, fn, c in found], want, args.tolerance)
    base, result, bname = baseline_cases(h, w2, ids, wts)
    base[1][1]()
    row["check"][base[1][0]] = rel(result["out"], want)
    times = time_cases([*cases, *base], args.warmup, args.reps)
    flops = 2 * S * topk * inter * H
    row["cases"] = {k: {"ms": v, "tflops": flops / v / 1e9} for k, v in times.items()}
    row["baseline"] = bname
    return row


def summary(rows) -> None:
    """Per shape: the fastest emitted producer beside the fastest fused_moe and _grouped_mm (the GEMM and
    its slot-order store), and the producer's compute-stream chain beside fused_moe + topk-sum and
    _grouped_mm + scatter + topk-reduce (through the token-order sum)."""
    print(
        f"\n{'shape':7} {'best emitted':>24} {'ms':>7} {'TFLOP/s':>7} {'fused_moe':>7} {'grouped':>7} {'fused/em':>8} {'grouped/em':>10}"
        f" | {'chain':>7} {'fused+sum':>9} {'grouped+scatter+reduce':>22} {'fused+sum/chain':>15}"
    )
    nan = {"ms": float("nan"), "tflops": float("nan")}
    for r in rows:
        c = r["cases"]
        best = part1.fastest(c, "emitted ")
        if best is None:
            continue
        e = c[best]
        fused = c.get(part1.fastest({k: v for k, v in c.items() if not k.endswith("+topk-sum")}, "fused_moe"), nan)["ms"]
        fused_sum = c.get(part1.fastest({k: v for k, v in c.items() if k.endswith("+topk-sum")}, "fused_moe"), nan)["ms"]
        chain = c.get(part1.fastest(c, "emitted+permute+topksum+notify"), nan)["ms"]
        grouped = c.get(r["baseline"], nan)["ms"]
        print(
            f"{r['shape']:7} {best:>24} {e['ms']:7.3f} {e['tflops']:7.1f} {fused:7.3f} {grouped:7.3f} {fused / e['ms']:8.2f} "
            f"{grouped / e['ms']:10.2f} | {chain:7.3f} {fused_sum:9.3f} {c.get(r['baseline'] + '+scatter+topk-reduce', nan)['ms']:22.3f} "
            f"{fused_sum / chain:15.2f}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--emitted",
        type=Path,
        required=True,
        help="moe-rs-prepare.sh's folder (<MoE-n>/<tile>/manifest.json)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results (default: $OUT/moe-rs-compute.json)",
    )
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
    # The warp-specialised body builds its tensor descriptors on the device, in memory Triton asks for.
    triton.set_allocator(lambda size, _align, _stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    rows = []
    for shape in [s for s in SHAPES if not wanted or s[0] in wanted]:
        print(
            f"{shape[0]}: S={shape[1]} H={shape[2]} I/W={shape[3] // args.world} E={shape[4]} top-{shape[5]}",
            flush=True,
        )
        rows.append(run_shape(shape, args, sms))
        for k, v in rows[-1]["errors"].items():
            print(f"  FAILED {k}: {v}", flush=True)
    summary(rows)
    result = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "world": args.world,
        "rows": rows,
    }
    out = args.out or (Path(os.environ["OUT"]) / "moe-rs-compute.json" if os.environ.get("OUT") else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
