"""The flash-attention body of ovl's ag-attention on one GPU, beside PyTorch's SDPA (flash backend).

Times, at TileLink's Attn-1 / Attn-2 per-rank shapes of a world of 8 (32 and 64 heads, head
dim 128, bf16, global sequence 16k-128k: each rank holds S/8 query rows and, once gathered,
all S key/value rows), the built-in body ``packages/tlx-emitter/kernels/flash_attention.py``
with every kv row present (the plain Triton kernel, no waits) and, for kernels compiled with
``ovl emit ag-attention`` into ``--emitted`` folders, the overlapped kernel with every chunk
slot already signalled (so its waits pass at once: the cost of the inserted code alone),
against ``torch.nn.functional.scaled_dot_product_attention`` restricted to its flash backend
on the same data. Causal cases take the last rank's queries (global positions 7S/8 onward,
SDPA's lower-right causal alignment), non-causal ones any rank's.

Every launch is checked first: the output buffer is poisoned (NaN), and the result must be
within ``--tolerance`` (relative Frobenius error) of SDPA's. Times are CUDA-event medians of
``--reps`` launches after ``--warmup``, body and SDPA interleaved round by round; TFLOP/s count
4·D per attended (query, key) pair per head. A failing case prints why and the run goes on.

    PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps python3 packages/bench/gpu/attention-compute.py --out $OUT/attention.json

What limits the body (known): kv is read through pointer loads (no TMA descriptors, no warp
specialisation as in FlashAttention-3), with 128 query rows x 64 kv rows a program and 8 warps;
the non-causal kv loop is software-pipelined by Triton (cp.async, ``num_stages``). The causal
path is two kv loops (blocks below the diagonal without a mask, the diagonal with it); in the
bare body each keeps an ``if`` on the block, which Triton does not pipeline through, while the
emitted kernel clips each arrival group's range by those bounds (no ``if``: pipelined). The body is
persistent (a grid of one program per SM looping over (query block, head) work items), as
ag-attention launches it; the emitted kernel waits once per arrival group in an outer loop
around each kv loop, so no wait sits in the pipelined loop. ``attention-prepare.sh`` (Node)
compiles the emitted kernels of every shape and ``attention-gpu.sh`` runs this script on them.
``--cpu-check`` runs small shapes under Triton's interpreter against SDPA's math backend on
the CPU (no timing): a check of this script and the body without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BODY = REPO / "packages" / "tlx-emitter" / "kernels" / "flash_attention.py"

if "--cpu-check" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import torch
import triton

WORLD = 8


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def attended_pairs(sq: int, s: int, causal: bool) -> int:
    """(query, key) pairs one head attends: all, or lower-right causal (the queries are the last sq positions)."""
    if not causal:
        return sq * s
    return sq * (s - sq) + sq * (sq + 1) // 2


def make_inputs(sq, s, h, hkv, d, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(sq, h * d, device=device, dtype=torch.bfloat16, generator=g)
    kv = torch.randn(s, 2 * hkv * d, device=device, dtype=torch.bfloat16, generator=g)
    return q, kv


def sdpa_views(q, kv, h, hkv, d):
    """SDPA's [1, H, L, D] tensors (contiguous, its preferred layout); kv heads repeated for GQA."""
    sq, s = q.shape[0], kv.shape[0]
    qh = q.view(sq, h, d).transpose(0, 1).unsqueeze(0).contiguous()
    k = kv[:, : hkv * d].reshape(s, hkv, d).transpose(0, 1)
    v = kv[:, hkv * d :].reshape(s, hkv, d).transpose(0, 1)
    if hkv != h:
        k, v = k.repeat_interleave(h // hkv, 0), v.repeat_interleave(h // hkv, 0)
    return qh, k.unsqueeze(0).contiguous(), v.unsqueeze(0).contiguous()


def sdpa_fn(qh, k, v, causal, flash: bool):
    """SDPA on the flash backend (the math one on the CPU); causal aligned lower-right."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    mask = None
    if causal:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(qh.shape[2], k.shape[2])
    backend = SDPBackend.FLASH_ATTENTION if flash else SDPBackend.MATH

    def run():
        with sdpa_kernel([backend]):
            return torch.nn.functional.scaled_dot_product_attention(qh, k, v, attn_mask=mask)

    return run


def num_sms(dev) -> int:
    """The device's multiprocessor count (a small stand-in under the interpreter)."""
    return torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 4


def rel_err(out, ref) -> float:
    o = out.float()
    if not bool(torch.isfinite(o).all()):
        return math.nan
    return float((o - ref.float()).norm() / ref.float().norm())


def body_launcher(fn, q, kv, o, sq, s, shard, h, hkv, d, causal, cfg, extra=None):
    bm, bn, warps, stages = cfg
    # The body is persistent: one program per SM (at most one per work item) loops over them.
    grid = (min(num_sms(q.device), triton.cdiv(sq, bm) * h),)

    def run():
        fn[grid](
            q,
            kv,
            o,
            sq,
            s,
            shard,
            **(extra or {}),
            sm_scale=d**-0.5,
            H=h,
            HKV=hkv,
            HEAD_DIM=d,
            BLOCK_M=bm,
            BLOCK_N=bn,
            CAUSAL=causal,
            num_warps=warps,
            num_stages=stages,
        )

    return run


def emitted_launcher(folder: Path, q, kv, o, sq, s, h, hkv, d, causal):
    """The overlapped kernel of an `ovl emit ag-attention` folder, as the last rank, every slot signalled."""
    m = json.loads((folder / "manifest.json").read_text())
    a = m["reference"]["attention"]
    want = (m["reference"]["M"], a["heads"], a["kvHeads"], a["headDim"], a["causal"], m["world"])
    got = (s, h, hkv, d, causal, WORLD)
    if want != got:
        return None, f"{folder} is S, H, Hkv, D, causal, world = {want}, not {got}"
    (k,) = m["kernels"]
    fn = getattr(load_module(folder / k["source"], f"ovl_attn_{folder.name}"), k["entry"])
    rank = m["world"] - 1
    dev = q.device
    buffers = {m["reference"]["inputs"]["Q"]: q, m["reference"]["inputs"]["KV"]: kv, m["reference"]["output"]: o}
    sig = torch.ones(m["signals"]["slots"], dtype=torch.int32, device=dev)  # epoch 1, every slot reached
    buffers[m["signals"]["buffer"]] = sig
    tables = {t["name"]: torch.tensor(t["values"][rank], dtype=torch.int32, device=dev) for t in m["tables"]}
    err = torch.zeros(8, dtype=torch.int32, device=dev)
    epoch = torch.ones(1, dtype=torch.int32, device=dev)
    args = {}
    for x in k["args"]:
        v = x["value"]
        kind = v["kind"]
        args[x["name"]] = {
            "buffer": lambda v=v: buffers[v["name"]],
            "table": lambda v=v: tables[v["name"]],
            "int": lambda v=v: v["value"],
            "rank": lambda: rank,
            "epoch-word": lambda: epoch,
            "error-buffer": lambda: err,
            "timeout-ns": lambda: 10_000_000_000,
        }[kind]()
    sms = num_sms(dev)
    grid = tuple(min(g.get("cap", sms), sms - g.get("reserve", 0)) if isinstance(g, dict) else g for g in k["grid"])

    def run():
        fn[grid](**args, **k["constexprs"], num_warps=k["numWarps"], num_stages=k["numStages"])

    def check():
        if int(err[0].item()) != 0:
            raise RuntimeError(f"a wait timed out: {err.tolist()}")

    return (run, check, (k["constexprs"]["BLOCK_M"], k["constexprs"]["BLOCK_N"], k["numWarps"], k["numStages"])), None


def time_interleaved(fns: dict, warmup: int, reps: int, rounds: int) -> dict:
    """Median ms of each callable, the callables taking turns round by round."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    torch.cuda.synchronize()
    times = {n: [] for n in fns}
    per = max(1, reps // rounds)
    for _ in range(rounds):
        for n, f in fns.items():
            start = [torch.cuda.Event(enable_timing=True) for _ in range(per)]
            end = [torch.cuda.Event(enable_timing=True) for _ in range(per)]
            for i in range(per):
                start[i].record()
                f()
                end[i].record()
            torch.cuda.synchronize()
            times[n] += [s.elapsed_time(e) for s, e in zip(start, end)]
    return {n: statistics.median(t) for n, t in times.items()}


def interpreter_patches(on: bool):
    """Under --cpu-check: the runner's fixes of Triton's interpreter (ovl_runtime on PYTHONPATH)."""
    import contextlib

    if not on:
        return contextlib.nullcontext()
    from ovl_runtime._emulate.interpret_patch import patched

    return patched()


def parse_cfg(text: str):
    bm, bn, w, st = (int(x) for x in text.split("x"))
    return bm, bn, w, st


def run_case(args, body, s, h, causal, configs, emitted) -> dict:
    d, hkv = args.head_dim, h if args.kv_heads is None else args.kv_heads
    sq = s // WORLD
    shard = WORLD - 1
    case = {"S": s, "heads": h, "kvHeads": hkv, "headDim": d, "causal": causal, "queryRows": sq, "kvRows": s}
    dev = "cpu" if args.cpu_check else "cuda"
    q, kv = make_inputs(sq, s, h, hkv, d, dev, seed=s + h + causal)
    qh, k, v = sdpa_views(q, kv, h, hkv, d)
    sdpa = sdpa_fn(qh, k, v, causal, flash=not args.cpu_check)
    ref = sdpa()[0].transpose(0, 1).reshape(sq, h * d)
    flops = 4 * d * h * attended_pairs(sq, s, causal)
    fns, errs = {"sdpa-flash": sdpa}, {}
    for cfg in configs:
        o = torch.full((sq, h * d), float("nan"), device=dev, dtype=torch.bfloat16)
        name = "body-{}x{}-w{}-s{}".format(*cfg)
        run = body_launcher(body, q, kv, o, sq, s, shard, h, hkv, d, causal, cfg)
        run()
        errs[name] = rel_err(o, ref)
        fns[name] = run
    for folder in emitted:
        o = torch.full((sq, h * d), float("nan"), device=dev, dtype=torch.bfloat16)
        made, _why = emitted_launcher(Path(folder), q, kv, o, sq, s, h, hkv, d, causal)
        if made is None:
            continue  # another shape's folder
        run, check, cfg = made
        name = "overlapped-{}x{}-w{}-s{}".format(*cfg)
        run()
        check()
        errs[name] = rel_err(o, ref)
        fns[name] = run
    bad = {n: e for n, e in errs.items() if not (e <= args.tolerance)}
    case["relErr"] = errs
    if bad:
        case["error"] = "outside tolerance {}: {}".format(args.tolerance, ", ".join(f"{n} {e:.3g}" for n, e in bad.items()))
    if args.cpu_check:
        return case
    ms = time_interleaved({n: f for n, f in fns.items() if n not in bad}, args.warmup, args.reps, args.rounds)
    case["ms"] = ms
    case["tflops"] = {n: flops / (t * 1e-3) / 1e12 for n, t in ms.items()}
    bodies = {n: t for n, t in ms.items() if n.startswith("body-")}
    if bodies and "sdpa-flash" in ms:
        best = min(bodies, key=bodies.get)
        case["best"] = best
        case["bodyVsSdpa"] = ms["sdpa-flash"] / bodies[best]
    over = {n: t for n, t in ms.items() if n.startswith("overlapped-")}
    if over and "sdpa-flash" in ms:
        case["overlappedVsSdpa"] = {n: ms["sdpa-flash"] / t for n, t in over.items()}
    return case


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seqs", default="16384,32768,65536,131072", help="global sequence lengths S (comma-separated)")
    p.add_argument("--heads", default="32,64", help="query heads: Attn-1 32, Attn-2 64 (comma-separated)")
    p.add_argument("--kv-heads", type=int, default=None, help="kv heads (default: the heads, MHA)")
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--causal", default="both", choices=("both", "yes", "no"))
    p.add_argument(
        "--configs",
        default="128x64x8x3,128x128x8x2,128x64x4x3,64x64x4x3",
        help="body configurations BLOCK_M x BLOCK_N x warps x stages (comma-separated)",
    )
    p.add_argument("--emitted", nargs="*", default=[], help="folders of `ovl emit ag-attention ... --world 8` to time with waits satisfied")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tolerance", type=float, default=2e-2)
    p.add_argument("--out", default=None, help="JSON output (default $OUT/attention-compute.json when $OUT is set)")
    p.add_argument("--cpu-check", action="store_true", help="small shapes on the CPU under Triton's interpreter, no timing")
    args = p.parse_args()
    body = load_module(BODY, "ovl_flash_attention_body").flash_attention
    if args.cpu_check:
        seqs, heads, configs = [256], [2], [(32, 32, 4, 1), (16, 64, 4, 1)]
        args.head_dim = 32
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: run on a GPU, or pass --cpu-check", file=sys.stderr)
            return 2
        seqs = [int(x) for x in args.seqs.split(",")]
        heads = [int(x) for x in args.heads.split(",")]
        configs = [parse_cfg(x) for x in args.configs.split(",")]
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    device = "cpu (interpreter)" if args.cpu_check else torch.cuda.get_device_name()
    results = []
    print(f"{device}; torch {torch.__version__}, triton {triton.__version__}; per-rank shapes of world {WORLD}, bf16")
    print(
        f"{'S':>7} {'H':>3} {'causal':>6} {'sdpa ms':>8} {'body ms':>8} {'TFLOP/s':>8} {'body/sdpa':>9} {'best config':>22} {'overlapped/sdpa':>15}"
    )
    for s in seqs:
        for h in heads:
            for causal in causals:
                t0 = time.time()
                try:
                    with interpreter_patches(args.cpu_check):
                        c = run_case(args, body, s, h, causal, configs, args.emitted)
                except Exception as exc:  # noqa: BLE001 - one failing case is reported, the others still run
                    c = {
                        "S": s,
                        "heads": h,
                        "causal": causal,
                        "error": f"{type(exc).__name__}: {exc}",
                        "trace": traceback.format_exc()[-2000:],
                    }
                    if not args.cpu_check:
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()
                c["seconds"] = round(time.time() - t0, 1)
                results.append(c)
                if "error" in c:
                    print(f"{s:>7} {h:>3} {causal!s:>6}  FAILED: {c['error']}")
                elif args.cpu_check:
                    print(f"{s:>7} {h:>3} {causal!s:>6}  ok, relative errors " + ", ".join(f"{n} {e:.2g}" for n, e in c["relErr"].items()))
                else:
                    best = c["best"]
                    over = ",".join(f"{r:.2f}" for r in c.get("overlappedVsSdpa", {}).values()) or "-"
                    print(
                        f"{s:>7} {h:>3} {causal!s:>6} {c['ms']['sdpa-flash']:>8.3f} {c['ms'][best]:>8.3f} {c['tflops'][best]:>8.1f} "
                        f"{c['bodyVsSdpa']:>9.3f} {best[5:]:>22} {over:>15}"
                    )
    ratios = [c["bodyVsSdpa"] for c in results if "bodyVsSdpa" in c]
    summary = {"geomeanBodyVsSdpa": math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None}
    if ratios:
        print(f"geometric mean body/sdpa-flash speed: {summary['geomeanBodyVsSdpa']:.3f} over {len(ratios)} cases")
    out = args.out or (os.path.join(os.environ["OUT"], "attention-compute.json") if os.environ.get("OUT") else None)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        doc = {"device": device, "torch": torch.__version__, "triton": triton.__version__, "world": WORLD, "cases": results, **summary}
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out}")
    return 1 if any("error" in c for c in results) else 0


if __name__ == "__main__":
    sys.exit(main())
