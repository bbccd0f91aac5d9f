"""Diagnostic: MoE part 2's grouped GEMM + scatter with h in the routing's block order, plain and
warp-specialised by Triton, beside the built-in body and ``torch._grouped_mm`` on pre-grouped rows.

At TileLink's MoE-1…6 per-rank shapes of world 8 on one GPU (``moe-rs-compute.py``'s shapes, data and
timer). Cases: ``base`` (``kernels/moe_gemm_scatter.py``: h gathered through ``sorted_token_ids`` by
pointer loads), ``sorted`` (``moe_bodies/moe_sorted_gemm_scatter.py``: h_sorted and the weights by
tensor descriptors; ``ws``: Triton's warp specialisation of the tile loop; ``tmaout``: C stored by TMA
in block order instead of scattered; ``notify``: the slab notifies in, counted against the routing's
cover). Every case is checked against fp32 first; CUDA-event medians, L2 flushed, cases interleaved.

    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/diag/moe_sorted.py --out $OUT/moe-sorted.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import triton

from ovl_runtime.moe import draw_routing
from ovl_runtime.moe_align import moe_align_block_size

HERE = Path(__file__).resolve().parent
GPU = HERE.parent
KERNELS = GPU.parents[1] / "tlx-emitter" / "kernels"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


part1 = _load("ovl_moe_compute", GPU / "moe-compute.py")
base = _load("ovl_moe_base", KERNELS / "moe_gemm_scatter.py").moe_gemm_scatter
sorted_body = _load("ovl_moe_sorted", HERE / "moe_bodies" / "moe_sorted_gemm_scatter.py").moe_sorted_gemm_scatter
WORLD = 8
#: name, BLOCK_N, warps, stages, WS, SORTED_OUT, NOTIFY
SORTED = [
    ("sorted 128x256 w8 s3", 256, 8, 3, False, False, False),
    ("sorted 128x256 w8 s4", 256, 8, 4, False, False, False),
    ("sorted ws 128x256 w4 s3", 256, 4, 3, True, False, False),
    ("sorted ws 128x256 w4 s4", 256, 4, 4, True, False, False),
    ("sorted ws 128x128 w4 s4", 128, 4, 4, True, False, False),
    ("sorted ws tmaout 128x256 w4 s3", 256, 4, 3, True, True, False),
    ("sorted tmaout 128x256 w8 s3", 256, 8, 3, False, True, False),
    ("sorted notify 128x256 w8 s4", 256, 8, 4, False, False, True),
]


def run_shape(shape, args, sms):
    name, S, H, inter_all, E, k = shape
    inter = inter_all // WORLD
    g = torch.Generator(device="cuda").manual_seed(0)
    h = (torch.randn(S * k, inter, device="cuda", generator=g) / 8).to(torch.bfloat16)
    w2 = (torch.randn(E, inter, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
    ids = torch.from_numpy(draw_routing(np.random.default_rng(1), S, k, E)).cuda()
    wts = torch.rand((S, k), device="cuda", generator=g)
    flat = ids.reshape(-1).long()
    flat_w = wts.reshape(-1).float().contiguous()
    want = torch.zeros(S * k, H, device="cuda")
    for e in torch.unique(flat).tolist():
        sl = torch.nonzero(flat == e).squeeze(1)
        want[sl] = (h[sl].float() @ w2[e].float()) * flat_w[sl, None]
    sid, eob, nb = moe_align_block_size(ids, E, 128)
    slots = S * k
    padded = sid.numel()
    valid = sid < slots
    h_sorted = torch.zeros(padded, inter, device="cuda", dtype=h.dtype)
    h_sorted[valid] = h[sid[valid].long()]
    slab_t, slabs = S // WORLD, WORLD
    # expected notifies: per valid block, its slab range, once per n-tile
    sid_h = sid.cpu().numpy().reshape(-1, 128)[: int(nb[0].item())]
    row = {"shape": name, "cases": {}, "check": {}, "errors": {}}
    cases = []

    def add(cname, fn, out, check):
        try:
            fn()
            torch.cuda.synchronize()
            err = check(out)
            if not err <= args.tolerance:
                raise RuntimeError(f"relative error {err:.3g}")
            row["check"][cname] = err
            cases.append((cname, fn))
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            row["errors"][cname] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()

    def scat(out):
        return part1.rel(out.float(), want)

    c0 = torch.full((slots, H), float("nan"), device="cuda", dtype=h.dtype)
    add(
        "base 128x256 w8 s4",
        lambda: base[(sms,)](
            h,
            w2,
            flat_w,
            c0,
            sid,
            eob,
            nb,
            H,
            inter,
            slots,
            BLOCK_M=128,
            BLOCK_N=256,
            BLOCK_K=64,
            NUM_SMS=sms,
            num_warps=8,
            num_stages=4,
        ),
        c0,
        scat,
    )
    for cname, bn, warps, stages, ws, tmaout, notify in SORTED:
        out = torch.full((padded if tmaout else slots, H), float("nan"), device="cuda", dtype=h.dtype)
        sig = torch.zeros(slabs + 1, device="cuda", dtype=torch.int32)

        def fn(
            out=out,
            sig=sig,
            bn=bn,
            warps=warps,
            stages=stages,
            ws=ws,
            tmaout=tmaout,
            notify=notify,
        ):
            sorted_body[(sms,)](
                h_sorted, w2, flat_w, out, sid, eob, nb, sig, H, inter, E, slots, padded,
                BLOCK_M=128, BLOCK_N=bn, BLOCK_K=64, NUM_SMS=sms, WS=ws, SORTED_OUT=tmaout, NOTIFY=notify,
                TOP_K=k, SLAB_T=slab_t, SLABS=slabs, num_warps=warps, num_stages=stages,
            )  # fmt: skip

        if tmaout:

            def check(o):
                return part1.rel(o[valid].float(), want[sid[valid].long()])
        elif notify:
            n_tiles = -(-H // bn)
            cover = np.zeros(slabs, dtype=np.int64)
            for b in sid_h:
                v = b[b < slots]
                cover[v.min() // k // slab_t : v.max() // k // slab_t + 1] += n_tiles

            def check(o, sig=sig, cover=cover):
                got = sig[:slabs].cpu().numpy()
                if not np.array_equal(got, cover):
                    raise RuntimeError(f"notifies {got.tolist()} != cover {cover.tolist()}")
                sig.zero_()
                return scat(o)
        else:
            check = scat
        add(cname, fn, out, check)
    grouped_rows = h[torch.argsort(flat, stable=True)].contiguous()
    offs = torch.cumsum(torch.bincount(flat, minlength=E), 0).to(torch.int32)
    mm, bname = part1.grouped_matmul(w2, offs, grouped_rows)
    cases.append((bname, lambda: mm(grouped_rows)))
    times = part1.time_cases(cases, args.warmup, args.reps)
    flops = 2 * S * k * inter * H
    row["cases"] = {c: {"ms": v, "tflops": flops / v / 1e9} for c, v in times.items()}
    row["baseline"] = bname
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--tolerance", type=float, default=0.02)
    args = p.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # device-side tensor descriptors need scratch memory for the TMA descriptors
    triton.set_allocator(lambda size, _align, _stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    rows = []
    for shape in part1.SHAPES:
        print(shape[0], flush=True)
        rows.append(run_shape(shape, args, sms))
        for c, v in rows[-1]["errors"].items():
            print(f"  FAILED {c}: {v}", flush=True)
    names = [c for c in rows[0]["cases"]]
    print("\n" + " | ".join(["shape", *names]))
    for r in rows:
        gm = r["cases"][r["baseline"]]["ms"]
        cells = [f"{r['cases'][c]['ms']:.3f} ({gm / r['cases'][c]['ms']:.2f})" if c in r["cases"] else "-" for c in names]
        print(" | ".join([r["shape"], *cells]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "rows": rows,
            },
            indent=1,
        )
    )
    print(f"wrote {args.out}")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
