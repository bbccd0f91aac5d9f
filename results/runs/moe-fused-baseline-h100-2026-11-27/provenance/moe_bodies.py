"""Diagnostic: variants of the two MoE bodies at TileLink's MoE-1…6 per-rank shapes (world 8) on one GPU,
beside ``torch._grouped_mm`` on pre-grouped rows, all in one run.

- part 1 (ag-moe, ``moe_gather_gemm``): X [S, H] gathered through ``sorted_token_ids``, W [E, H, I/8];
- part 2 (moe-rs, ``moe_gemm_scatter``): h [S·k, I/8] rows in slot order, W2 [E, I/8, H], weighted rows
  scattered to their slots.

Beside them, at each of its configurations, a vLLM-style fused-MoE kernel (``../fused_moe.py``), the
same gather / GEMM / weighting / slot-order store in a non-persistent grid. Variants of each plain body
(no waits, no notifies): ``base`` (the built-in file), ``tma`` (the experts'
weights through a rank-3 tensor descriptor, ``moe_bodies/*_tma.py``) and ``tma_flat`` (the same with the
persistent tile loop flattened into the K loop), at several tiles and launch configurations; for part 2
also the producers ``ovl emit moe-rs --kernel <variant>`` compiled (``moe_bodies_prepare.sh``), their
notifies landing on this GPU. Every case is checked against fp32 (poisoned output) before it is timed;
times are CUDA-event medians with the L2 flushed, cases interleaved (``moe-compute.py``'s timer).

    bash packages/bench/gpu/diag/moe_bodies_prepare.sh out-moe-diag          # where Node is
    PYTHONPATH=$PWD/packages/runtime-py/src python3 packages/bench/gpu/diag/moe_bodies.py \
        --emitted out-moe-diag --out $OUT/moe-bodies.json
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import triton
from ovl_runtime.gpu_rank import whole_device_grids
from ovl_runtime.manifest import load_manifest
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
part2 = _load("ovl_moe_rs_compute", GPU / "moe-rs-compute.py")
fused_moe = _load("ovl_bench_fused_moe", GPU / "fused_moe.py")
SHAPES, rel, time_cases, checked = part1.SHAPES, part1.rel, part1.time_cases, part1.checked

#: BLOCK_M, BLOCK_N, BLOCK_K, warps, stages (of both bodies)
CONFIGS = [
    (128, 256, 64, 8, 4),
    (128, 256, 64, 8, 3),
]


def flattened(src: Path, out: Path) -> Path:
    """``src`` with its persistent tile loop flattened into the K loop (``flatten=True``)."""
    text = src.read_text()
    new, n = re.subn(
        r"tl\.range\(tl\.program_id\(0\), num_tiles, NUM_SMS\)",
        "tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True)",
        text,
    )
    if n != 1:
        raise ValueError(f"{src}: no persistent tile loop to flatten")
    out.write_text(new)
    return out


def variants(tmp: Path, base: str, tma: str) -> dict[str, Path]:
    return {
        "base": KERNELS / base,
        "tma_flat": flattened(HERE / "moe_bodies" / tma, tmp / f"flat_{tma}"),
    }


def plain_cases(part, mods, ids, experts, n, like, launch):
    """Every (variant, configuration) of a plain body: (name, fn, output); ``launch(mod, tables, c, extra,
    config)`` launches one (``extra``: the expert count for the variants that take it)."""
    T, k = ids.shape
    out = []
    for vname, mod in mods.items():
        for cfg in CONFIGS:
            bm, bn, bk, warps, stages = cfg
            tables = moe_align_block_size(ids, experts, bm)
            c = torch.empty(T * k, n, device=like.device, dtype=like.dtype)
            extra = {} if vname == "base" else {"E": experts}
            out.append(
                (
                    f"{part} {vname} {bm}x{bn}x{bk} w{warps} s{stages}",
                    functools.partial(launch, mod, tables, c, extra, cfg),
                    c,
                )
            )
    return out


def part1_cases(mods, x, w, ids, sms):
    """The gather + grouped GEMM body's plain cases."""
    T, k = ids.shape
    E, K, N = w.shape

    def launch(mod, tables, c, extra, cfg):
        bm, bn, bk, warps, stages = cfg
        mod.moe_gather_gemm[(sms,)](
            x, w, c, *tables, T, N, K, **extra,
            TOP_K=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_SMS=sms, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return plain_cases("p1", mods, ids, E, N, x, launch)


def part1_emitted_cases(folder: Path, x, w, ids, sms, programs: int | None = None):
    """Per prepared tile: the ag-moe consumer ``ovl emit`` compiled, every chunk slot already at the
    launch's target (epoch 1), so its waits pass at once: (name, fn, output, error buffer). ``programs``: launch
    a persistent body with that many programs (its ``num-programs`` argument too) instead of the manifest's grid."""
    T, k = ids.shape
    E = w.shape[0]
    out = []
    for mdir in sorted(p for p in folder.iterdir() if (p / "manifest.json").exists()):
        m = load_manifest(mdir / "manifest.json")
        kern = next(x_ for x_ in m.kernels if x_.template_kind == "local-consumer")
        p = kern.template_params
        bm = int(p["BLOCK_M"])
        if (
            int(p["M"]),
            int(p["topk"]),
            int(p["experts"]),
            int(p["N"]),
            int(p["K"]),
        ) != (T, k, E, w.shape[2], w.shape[1]):
            raise ValueError(f"{mdir}: compiled for another shape ({p})")
        sorted_ids, eob, nb = moe_align_block_size(ids, E, bm)
        c = torch.empty(T * k, w.shape[2], device=x.device, dtype=x.dtype)
        buffers = {
            p["a"]: x,
            p["b"]: w,
            p["c"]: c,
            p["sortedIds"]: sorted_ids,
            p["expertOfBlock"]: eob,
            p["numBlocks"]: nb,
        }
        sig = torch.ones((m.signals.slots,), dtype=torch.int32, device=x.device)
        err = torch.zeros((8,), dtype=torch.int32, device=x.device)
        args = {}
        for name, a in kern.args:
            if a.kind == "buffer":
                args[name] = sig if a.name == m.signals.buffer else buffers[a.name]
            elif a.kind == "table":
                args[name] = torch.tensor(
                    m.table(a.name).values[0], dtype=torch.int32, device=x.device
                )
            elif a.kind == "epoch-word":
                args[name] = torch.ones((1,), dtype=torch.int32, device=x.device)
            elif a.kind == "error-buffer":
                args[name] = err
            elif a.kind == "rank":
                args[name] = 0
            elif a.kind == "num-programs":
                args[name] = programs or sms
            elif a.kind in ("int", "timeout-ns"):
                args[name] = a.value if a.kind == "int" else m.wait_timeout_ns
            else:
                raise ValueError(f"{mdir}: argument {name} of kind {a.kind}")
        args.update(kern.constexprs)
        jit = getattr(
            _load(
                f"p1_emitted_{mdir.parent.parent.name}_{mdir.name}", mdir / kern.source
            ),
            kern.entry,
        )
        # The manifest's grid: num-sms for a persistent body, one program per tile otherwise.
        grid = (programs,) if programs else whole_device_grids(m, sms)[m.kernels.index(kern)]

        def run(jit=jit, args=args, grid=grid, warps=kern.num_warps, stages=kern.num_stages):
            jit[grid](**args, num_warps=warps, num_stages=stages)

        group = f" g{kern.constexprs['GROUP_M']}" if "GROUP_M" in kern.constexprs else ""
        group += f" p{programs}" if programs else ""
        out.append(
            (
                f"p1 {mdir.parent.parent.name} emitted {bm}x{p['BLOCK_N']}x{kern.constexprs.get('BLOCK_K')}{group} w{kern.num_warps} s{kern.num_stages}",
                run,
                c,
                err,
            )
        )
    return out


def without_wait_errors(row, good, errs):
    """``good`` less the emitted cases whose error buffer records a wait (``errs``: (name, buffer)),
    each named in ``row["errors"]``."""
    for cname, err in errs:
        if int(err[0]) != 0:
            row["errors"][cname] = f"wait error {err.tolist()}"
            good = [g for g in good if g[0] != cname]
    return good


def part2_plain_cases(mods, h, w2, ids, wts, sms):
    """The grouped GEMM + scatter body's plain cases."""
    T, k = ids.shape
    E, K, N = w2.shape
    flat_w = wts.reshape(-1).float().contiguous()

    def launch(mod, tables, c, extra, cfg):
        bm, bn, bk, warps, stages = cfg
        mod.moe_gemm_scatter[(sms,)](
            h, w2, flat_w, c, *tables, N, K, **extra, SLOTS=T * k,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_SMS=sms, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return plain_cases("p2", mods, ids, E, N, h, launch)


def run_shape(shape, args, mods1, mods2, sms):
    name, S, H, inter_all, E, topk = shape
    n = inter_all // args.world
    g = torch.Generator(device="cuda").manual_seed(0)
    row = {
        "shape": name,
        "S": S,
        "H": H,
        "I_per_rank": n,
        "E": E,
        "topk": topk,
        "check": {},
        "errors": {},
        "cases": {},
    }
    ids = torch.from_numpy(draw_routing(np.random.default_rng(1), S, topk, E)).cuda()
    flops = 2 * S * topk * H * n
    t0 = time.time()
    if "1" in args.parts:
        x = (torch.randn(S, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
        w = (torch.randn(E, H, n, device="cuda", generator=g) / 8).to(torch.bfloat16)
        want = part1.reference(x, w, ids)
        cases = part1_cases(mods1, x, w, ids, sms)
        cases += [(f"p1 {n}", fn, c) for n, fn, c in fused_moe.cases(x, w, ids, a_div=topk)]
        errs = []
        if args.emitted is not None:
            for vdir in sorted(
                p for p in (args.emitted / "p1").iterdir() if (p / name).is_dir()
            ):
                for cname, fn, c, err in part1_emitted_cases(
                    vdir / name, x, w, ids, sms
                ):
                    cases.append((cname, fn, c))
                    errs.append((cname, err))
        good = without_wait_errors(row, checked(row, cases, want, args.tolerance), errs)
        base, _, bname = part1.grouped_cases(x, w, ids)
        times = time_cases(
            [*good, *[(f"p1 {k_}", f) for k_, f in base]], args.warmup, args.reps
        )
        row["cases"].update(
            {k_: {"ms": v, "tflops": flops / v / 1e9} for k_, v in times.items()}
        )
        row["p1_baseline"] = f"p1 {bname}"
        del x, w, want
    if "2" in args.parts:
        h = (torch.randn(S * topk, n, device="cuda", generator=g) / 8).to(
            torch.bfloat16
        )
        w2 = (torch.randn(E, n, H, device="cuda", generator=g) / 8).to(torch.bfloat16)
        wts = torch.rand((S, topk), device="cuda", generator=g)
        want = torch.zeros(S * topk, H, device="cuda")
        flat = ids.reshape(-1).long()
        for e in torch.unique(flat).tolist():
            sl = torch.nonzero(flat == e).squeeze(1)
            want[sl] = (h[sl].float() @ w2[e].float()) * wts.reshape(-1)[sl, None]
        cases = part2_plain_cases(mods2, h, w2, ids, wts, sms)
        cases += [(f"p2 {n}", fn, c) for n, fn, c in fused_moe.cases(h, w2, ids, a_div=1, weights=wts)]
        if args.emitted is not None:
            for vdir in sorted(
                p for p in (args.emitted / "p2").iterdir() if (p / name).is_dir()
            ):
                try:
                    found = part2.body_cases(vdir / name, h, w2, ids, wts, sms)
                except Exception as exc:  # noqa: BLE001
                    row["errors"][f"p2 emitted {vdir.name}"] = (
                        f"{type(exc).__name__}: {exc}"
                    )
                    traceback.print_exc()
                    continue
                cases += [
                    (f"p2 {vdir.name} {c}", fn, p)
                    for c, fn, p in found
                    if c.startswith("emitted")
                ]
        good = checked(row, cases, want, args.tolerance)
        base, _, bname = part2.baseline_cases(h, w2, ids, wts)
        times = time_cases([*good, (f"p2 {bname}", base[0][1])], args.warmup, args.reps)
        row["cases"].update(
            {k_: {"ms": v, "tflops": flops / v / 1e9} for k_, v in times.items()}
        )
        row["p2_baseline"] = f"p2 {bname}"
    print(
        f"  {name}: {len(row['cases'])} cases timed, {len(row['errors'])} failed, {time.time() - t0:.0f} s",
        flush=True,
    )
    return row


def summary(rows) -> None:
    """Per shape and part: the baseline, and the best case of each variant with its ratio to the baseline."""
    print(
        f"\n{'shape':6} {'part':4} {'variant':18} {'best config':26} {'ms':>7} {'TFLOP/s':>8} {'base/it':>8}"
    )
    for r in rows:
        c = r["cases"]
        for part in ("p1", "p2"):
            bname = r.get(f"{part}_baseline")
            if bname not in c:
                continue
            base = c[bname]["ms"]
            print(
                f"{r['shape']:6} {part:4} {bname[3:]:18} {'':26} {base:7.3f} {c[bname]['tflops']:8.1f} {1.0:8.2f}"
            )
            best: dict[str, tuple[str, dict]] = {}
            for k_, v in c.items():
                words = k_.split(" ")
                if words[0] != part or k_ == bname:
                    continue
                emitted = len(words) > 2 and words[2] == "emitted"
                variant = f"{words[1]} emitted" if emitted else words[1]
                cfg = " ".join(words[3:] if emitted else words[2:])
                if variant not in best or v["ms"] < best[variant][1]["ms"]:
                    best[variant] = (cfg, v)
            for variant, (cfg, v) in sorted(best.items()):
                print(
                    f"{'':6} {'':4} {variant:18} {cfg:26} {v['ms']:7.3f} {v['tflops']:8.1f} {base / v['ms']:8.2f}"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--emitted",
        type=Path,
        default=None,
        help="moe_bodies_prepare.sh's folder (p2/<variant>/<MoE-n>/<tile>)",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shapes", default="")
    p.add_argument("--parts", default="12")
    p.add_argument("--world", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--tolerance", type=float, default=0.02)
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("moe_bodies.py needs a CUDA GPU")
    triton.set_allocator(
        lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tmp = Path(tempfile.mkdtemp())
    mods1 = {
        k_: _load(f"p1_{k_}", v)
        for k_, v in variants(
            tmp, "moe_gather_gemm.py", "moe_gather_gemm_tma.py"
        ).items()
    }
    mods2 = {
        k_: _load(f"p2_{k_}", v)
        for k_, v in variants(
            tmp, "moe_gemm_scatter.py", "moe_gemm_scatter_tma.py"
        ).items()
    }
    wanted = {s for s in args.shapes.split(",") if s}
    rows = []
    for shape in [s for s in SHAPES if not wanted or s[0] in wanted]:
        print(
            f"{shape[0]}: S={shape[1]} H={shape[2]} I/W={shape[3] // args.world} E={shape[4]} top-{shape[5]}",
            flush=True,
        )
        rows.append(run_shape(shape, args, mods1, mods2, sms))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps(
                {
                    "device": torch.cuda.get_device_name(0),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "rows": rows,
                },
                indent=1,
            )
        )
    summary(rows)


if __name__ == "__main__":
    main()
