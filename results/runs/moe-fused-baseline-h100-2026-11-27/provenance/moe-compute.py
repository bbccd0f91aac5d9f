"""The MoE gather + grouped GEMM body of ovl's ag-moe on one GPU, beside PyTorch's grouped GEMM.

Times, at TileLink's MoE-1 … MoE-6 per-rank shapes of a world of 8 (S = 8192 tokens gathered,
hidden H 2048/4096, intermediate I 1536/2048 of which a rank holds I/8 columns, E 8/32
experts, top-k 2/5, bf16, a uniform random routing), with every token present:

- ``routing``: the two device kernels that build ``sorted_token_ids`` / ``expert_of_block`` /
  ``num_blocks`` from ``topk_ids`` (``ovl_runtime.moe_align``);
- ``body``: the built-in body ``packages/tlx-emitter/kernels/moe_gather_gemm.py`` (the plain
  Triton kernel, no waits) at a few tile configurations, reading the tables from the device and
  writing ``C[t·k + j] = X[t] @ W[topk_ids[t, j]]``;
- ``grouped_mm``: ``torch._grouped_mm`` on rows already gathered and grouped by expert (the
  GEMM alone), and ``gather+grouped_mm+scatter``: the same with the gather of the token rows
  before and the scatter to token-slot order after, which the body fuses. Without
  ``torch._grouped_mm`` (or where it refuses the shape), a loop of cuBLAS matmuls per expert.
- ``fused_moe``: a vLLM-style fused-MoE Triton kernel (``fused_moe.py``: the same gather, GEMM and
  slot-order store, a non-persistent grouped grid) at each of its configurations; the summary takes
  the fastest.

Every body launch is checked first: the output is poisoned (NaN) and must be within
``--tolerance`` (relative Frobenius error) of an fp32 reference; the routing tables must equal
their numpy reference. Times are CUDA-event medians of ``--reps`` launches after ``--warmup``,
the L2 flushed and the GPU held ~0.5 ms (so the host's enqueue is not timed) before each, cases
interleaved round by round; TFLOP/s count 2·S·k·H·N.
A failing case prints why and the run goes on.

    PYTHONPATH=$PWD/packages/runtime-py/src:$PWD/out-deps python3 packages/bench/gpu/moe-compute.py --out $OUT/moe-compute.json

``--cpu-check`` runs small shapes under Triton's interpreter (no timing): a check of this
script and the body without a GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BODY = REPO / "packages" / "tlx-emitter" / "kernels" / "moe_gather_gemm.py"
FUSED_MOE = Path(__file__).resolve().parent / "fused_moe.py"

if "--cpu-check" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import torch
from ovl_runtime.operators.ag_moe.routing import draw_routing, moe_align_reference
from ovl_runtime.operators.ag_moe.routing_kernels import moe_align_block_size

WORLD = 8
#: Body configurations: BLOCK_M, BLOCK_N, BLOCK_K, warps, stages.
CONFIGS = [
    (64, 64, 64, 4, 4),
    (64, 128, 64, 4, 3),
    (128, 64, 64, 4, 4),
    (128, 128, 64, 8, 3),
]
FLUSH_BYTES = 256 * 2**20


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: TileLink Table 4: name, S (tokens, all ranks), H, I (all ranks), E, top-k (``moe_routing_blocks.py``, torch-free).
SHAPES = load_module(Path(__file__).resolve().parent / "moe_routing_blocks.py", "ovl_moe_routing_blocks").SHAPES


def reference(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``C[t·k + j] = x[t] @ w[ids[t, j]]`` in fp32, expert by expert."""
    k = ids.shape[1]
    flat = ids.reshape(-1).long()
    out = torch.zeros(flat.numel(), w.shape[2], device=x.device, dtype=torch.float32)
    for e in torch.unique(flat).tolist():
        slots = torch.nonzero(flat == e).squeeze(1)
        out[slots] = x[slots // k].float() @ w[e].float()
    return out


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    g = got.float()
    if not torch.isfinite(g).all():
        return float("nan")
    return ((g - want).norm() / want.norm()).item()


class Body:
    """One configuration of the body on one shape's data, launched as the runner would."""

    def __init__(self, mod, cfg, x, w, ids, sms: int):
        self.bm, self.bn, self.bk, self.warps, self.stages = cfg
        self.fn, self.x, self.w, self.ids, self.sms = (
            mod.moe_gather_gemm,
            x,
            w,
            ids,
            sms,
        )
        self.tokens, self.topk = ids.shape
        self.experts, _, self.n = w.shape
        self.c = torch.empty(
            self.tokens * self.topk, self.n, device=x.device, dtype=x.dtype
        )
        self.tables = moe_align_block_size(ids, self.experts, self.bm)

    @property
    def name(self) -> str:
        return f"body {self.bm}x{self.bn}x{self.bk} w{self.warps} s{self.stages}"

    def __call__(self) -> None:
        if (
            self.x.device.type == "cpu"
        ):  # Triton's interpreter, made safe for ovl's kernels
            from ovl_runtime._emulate.interpret_patch import patched

            with patched():
                self._launch()
        else:
            self._launch()

    def _launch(self) -> None:
        sorted_ids, expert_of_block, num_blocks = self.tables
        self.fn[(self.sms,)](
            self.x, self.w, self.c, sorted_ids, expert_of_block, num_blocks,
            self.tokens, self.n, self.x.shape[1],
            TOP_K=self.topk, BLOCK_M=self.bm, BLOCK_N=self.bn, BLOCK_K=self.bk, NUM_SMS=self.sms,
            num_warps=self.warps, num_stages=self.stages,
        )  # fmt: skip


def grouped_matmul(w: torch.Tensor, offs: torch.Tensor, probe: torch.Tensor):
    """``(fn, name)``: ``fn(a)`` multiplies rows grouped by expert (``offs``: each group's end) by their
    expert's ``w[e]`` — ``torch._grouped_mm`` where it exists and agrees on ``probe`` with a cuBLAS
    matmul per expert, else that loop."""
    ends = offs.tolist()

    def loop(a: torch.Tensor) -> torch.Tensor:
        res = torch.empty(a.shape[0], w.shape[2], device=a.device, dtype=a.dtype)
        lo = 0
        for e, hi in enumerate(ends):
            if hi > lo:
                torch.matmul(a[lo:hi], w[e], out=res[lo:hi])
            lo = hi
        return res

    gmm = getattr(torch, "_grouped_mm", None)
    if gmm is None:
        return loop, "matmul-per-expert"
    try:
        torch.testing.assert_close(
            gmm(probe, w, offs=offs).float(), loop(probe).float(), rtol=2e-2, atol=2e-2
        )
    except Exception as exc:  # noqa: BLE001 - a build or shape _grouped_mm refuses
        print(
            f"  torch._grouped_mm refused ({type(exc).__name__}: {exc}); a cuBLAS matmul per expert instead",
            flush=True,
        )
        return loop, "matmul-per-expert"
    return (lambda a: gmm(a, w, offs=offs)), "grouped_mm"


def grouped_cases(x, w, ids):
    """The baselines: ``torch._grouped_mm`` on pre-grouped rows, and gather + it + scatter."""
    k = ids.shape[1]
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w.shape[0])
    offs = torch.cumsum(counts, 0).to(torch.int32)
    grouped_x = x[order // k].contiguous()
    out = torch.empty(flat.numel(), w.shape[2], device=x.device, dtype=x.dtype)
    mm, name = grouped_matmul(w, offs, grouped_x)

    def fused() -> None:
        out[order] = mm(x[order // k])

    return [(name, lambda: mm(grouped_x)), (f"gather+{name}+scatter", fused)], out, name


def checked(row, cases, want, tolerance):
    """``(name, fn)`` of the cases whose poisoned output ``c`` comes back within ``tolerance`` of
    ``want`` (errors in ``row["check"]``); failures in ``row["errors"]``, the run going on."""
    good = []
    for name, fn, c in cases:
        try:
            c.fill_(float("nan"))
            fn()
            if c.is_cuda:
                torch.cuda.synchronize()
            err = rel(c, want)
            if not err <= tolerance:
                raise RuntimeError(f"relative error {err:.3g} exceeds {tolerance}")
            row["check"][name] = err
            good.append((name, fn))
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            row["errors"][name] = f"{type(exc).__name__}: {str(exc)[:400]}"
            print(f"  FAILED {name}: {row['errors'][name]}", flush=True)
    return good


#: GPU cycles a timed launch waits behind (``torch.cuda._sleep``) after the L2 flush: about 0.5 ms, so the
#: host's enqueue of the launch (tens of microseconds for a Triton kernel with many arguments) ends while
#: the GPU is still busy and stays out of the event-timed region.
LEAD_CYCLES = 1_000_000


def time_cases(cases, warmup: int, reps: int, lead_cycles: int = LEAD_CYCLES) -> dict[str, float]:
    """CUDA-event medians (ms), the L2 flushed and the GPU held ``lead_cycles`` before every launch
    (0: not held), cases interleaved."""
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    for _ in range(warmup):
        for _, fn in cases:
            fn()
    times: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(reps):
        for name, fn in cases:
            flush.zero_()
            if lead_cycles:
                torch.cuda._sleep(lead_cycles)
            start, end = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )
            start.record()
            fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    return {name: statistics.median(v) for name, v in times.items()}


def host_enqueue_us(cases, reps: int = 20) -> dict[str, float]:
    """Median host time (µs) of each case's call while the GPU is busy: what the launch costs the CPU."""
    out = {}
    for name, fn in cases:
        got = []
        for _ in range(reps):
            torch.cuda._sleep(2_000_000)
            t0 = time.perf_counter()
            fn()
            got.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
        out[name] = statistics.median(got)
    return out


def run_shape(mod, shape, args, sms: int) -> dict:
    name, S, H, inter, E, topk = shape
    n = inter // args.world
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn(S, H, device=dev, generator=g) / 8).to(torch.bfloat16)
    w = (torch.randn(E, H, n, device=dev, generator=g) / 8).to(torch.bfloat16)
    ids_np = draw_routing(np.random.default_rng(1), S, topk, E)
    ids = torch.from_numpy(ids_np).to(dev)
    want = reference(x, w, ids)
    row = {
        "shape": name,
        "S": S,
        "H": H,
        "N": n,
        "E": E,
        "topk": topk,
        "cases": {},
        "errors": {},
    }
    # The routing tables against numpy (and their time).
    s_ids, eob, nb = moe_align_block_size(ids, E, 64)
    r_ids, r_eob, r_blocks = moe_align_reference(ids_np, E, 64)
    if (
        int(nb[0]) != r_blocks
        or not np.array_equal(s_ids.cpu().numpy(), r_ids)
        or not np.array_equal(eob.cpu().numpy(), r_eob)
    ):
        row["errors"]["routing"] = "the device tables differ from the numpy reference"
    bodies = []
    for cfg in CONFIGS if not args.cpu_check else CONFIGS[:1]:
        try:
            b = Body(mod, cfg, x, w, ids, sms)
            bodies.append((b.name, b, b.c))
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            row["errors"][f"body {cfg}"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
    if not args.cpu_check:
        fused = load_module(FUSED_MOE, "ovl_bench_fused_moe")
        bodies += fused.cases(x, w, ids, a_div=topk)
    row["check"] = {}
    bodies = checked(row, bodies, want, args.tolerance)
    if args.cpu_check:
        return row
    cases, out, base = grouped_cases(x, w, ids)
    cases[1][1]()
    row["check"][cases[1][0]] = rel(out, want)
    routing_out = (
        torch.empty(
            32, max(2, 1 << (E - 1).bit_length()), dtype=torch.int32, device=dev
        ),
        s_ids,
        eob,
        nb,
    )
    routing = ("routing", lambda: moe_align_block_size(ids, E, 64, out=routing_out))
    times = time_cases([routing, *bodies, *cases], args.warmup, args.reps)
    flops = 2 * S * topk * H * n
    row["cases"] = {k: {"ms": v, "tflops": flops / v / 1e9} for k, v in times.items()}
    row["baseline"] = base
    return row


def fastest(cases: dict, prefix: str) -> str | None:
    """The fastest case whose name starts with ``prefix``."""
    named = [k for k in cases if k.startswith(prefix)]
    return min(named, key=lambda k: cases[k]["ms"]) if named else None


def summary(rows) -> None:
    print(
        f"\n{'shape':7} {'routing ms':>10} {'best body':>26} {'ms':>7} {'TFLOP/s':>7} {'grouped ms':>10} "
        f"{'+gather/scatter':>15} {'fused_moe best':>26} {'ms':>7} {'grouped/body':>12} {'fused/body':>10}"
    )
    nan = {"ms": float("nan"), "tflops": float("nan")}
    for r in rows:
        c = r["cases"]
        best, fused = fastest(c, "body"), fastest(c, "fused_moe")
        if best is None:
            continue
        b, f = c[best], c.get(fused, nan)
        base = c.get(r["baseline"], nan)["ms"]
        scattered = c.get(f"gather+{r['baseline']}+scatter", nan)["ms"]
        print(
            f"{r['shape']:7} {c['routing']['ms']:10.3f} {best:>26} {b['ms']:7.3f} {b['tflops']:7.1f} {base:10.3f} "
            f"{scattered:15.3f} {fused or '-':>26} {f['ms']:7.3f} "
            f"{base / b['ms']:12.2f} {f['ms'] / b['ms']:10.2f}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results (default: $OUT/moe-compute.json)",
    )
    p.add_argument(
        "--shapes", default="", help="comma-separated subset, e.g. MoE-1,MoE-4"
    )
    p.add_argument("--world", type=int, default=WORLD)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument(
        "--cpu-check",
        action="store_true",
        help="small shapes under Triton's interpreter, no timing",
    )
    args = p.parse_args()
    mod = load_module(BODY, "ovl_moe_body")
    if args.cpu_check:
        shapes = [("cpu-1", 96, 64, 8 * 32, 4, 2), ("cpu-2", 64, 32, 8 * 32, 3, 1)]
        sms = 4
    else:
        if not torch.cuda.is_available():
            sys.exit("moe-compute.py needs a CUDA GPU (or --cpu-check)")
        wanted = {s for s in args.shapes.split(",") if s}
        shapes = [s for s in SHAPES if not wanted or s[0] in wanted]
        sms = torch.cuda.get_device_properties(0).multi_processor_count
    mod_time = time.time()
    rows = []
    for shape in shapes:
        print(
            f"{shape[0]}: S={shape[1]} H={shape[2]} N={shape[3] // args.world} E={shape[4]} top-{shape[5]}",
            flush=True,
        )
        rows.append(run_shape(mod, shape, args, sms))
        for k, v in rows[-1]["errors"].items():
            print(f"  FAILED {k}: {v}", flush=True)
    device = (
        torch.cuda.get_device_name(0)
        if torch.cuda.is_available()
        else "cpu (interpreter)"
    )
    result = {
        "device": device,
        "torch": torch.__version__,
        "world": args.world,
        "rows": rows,
        "seconds": time.time() - mod_time,
    }
    if not args.cpu_check:
        summary(rows)
    else:
        for r in rows:
            print(
                f"{r['shape']}: checks {r.get('check')} errors {r['errors'] or 'none'}"
            )
    out = args.out or (
        Path(os.environ["OUT"]) / "moe-compute.json" if os.environ.get("OUT") else None
    )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        print(f"wrote {out}")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
