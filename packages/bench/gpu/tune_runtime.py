"""The runtime's on-device tuning end to end on one GPU: the torch API's first call of each shape, with tuning on
(``ovl_runtime.ops.tune()``), lists the compiler's candidates, times each GEMM kernel alone against cuBLAS, binds the
fastest and caches it; a second bind (a new process, emulated by forgetting the in-memory choice) takes the cached
choice at once. Every rank on one GPU (``OneGpuGroup``): each result is checked against float32 torch; the
operator's own times would not be performance figures (the ranks share the GPU), the tuner's are (it times one
rank's GEMM alone on the whole GPU, as one rank per GPU runs it).

    OVL_CLI="node packages/cli/dist/bin.js" PYTHONPATH=packages/runtime-py/src \\
        python3 packages/bench/gpu/tune_runtime.py prepare tune-kern                 # no GPU: kernels + candidates
    OVL_KERNELS=tune-kern PYTHONPATH=packages/runtime-py/src \\
        python3 packages/bench/gpu/tune_runtime.py run --out tune-runtime.json       # GPU, no compiler needed
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: (operator, world, rows per rank, N, K): two GEMM+RS producers and one AllGather+GEMM off the tuned tables, each
#: bound (as the torch API binds them by default) as the operator for every row count.
SHAPES = (
    ("gemm-rs", 4, 4091, 7168, 18944 // 4),  # hidden 7168, intermediate 18944, ragged rows (padded to 4096)
    ("gemm-rs", 5, 1638, 5120, 25600 // 5),  # hidden 5120, intermediate 25600, world 5
    ("ag-gemm", 3, 2731, 13824 // 3, 5120),  # hidden 5120, intermediate 13824, world 3
)
TOP_K = 8
RS_ROW_BLOCK = 128


def key_of(op: str, world: int, rows: int, n: int, k: int) -> Any:
    """The key the torch API binds for this call (``call_key``; GEMM+RS at ``matmul_reduce_scatter``'s padded slabs):
    the operator for every row count, tuned at the row count it describes, unless ``OVL_ANY_ROWS=0``."""
    from ovl_runtime._kernels.library import call_key

    if op == "ag-gemm":
        return call_key(op, world, world * rows, n, k)
    return call_key(op, world, world * (math.ceil(rows / RS_ROW_BLOCK) * RS_ROW_BLOCK), n, k)


def prepare(into: str) -> None:
    from ovl_runtime._kernels.library import ensure_compiled
    from ovl_runtime._tune.candidates import prepare_candidates

    for s in SHAPES:
        key = key_of(*s)
        t0 = time.monotonic()
        ensure_compiled(key, Path(into))
        cands = prepare_candidates(key, TOP_K, Path(into))
        print(f"{key.dirname}: {len(cands)} candidates in {time.monotonic() - t0:.0f} s", flush=True)
        for c in cands:
            print(f"  {c.source:8s} {c.config.label}", flush=True)


def call(op: str, g: Any, world: int, rows: int, n: int, k: int) -> float:
    """One call of the torch API's operator at this shape; the relative error against float32 torch."""
    import torch
    from ovl_runtime import ops

    gen = torch.Generator(device="cuda").manual_seed(rows)
    if op == "ag-gemm":
        x = torch.randn(world, rows, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        w = torch.randn(world, k, n, device="cuda", dtype=torch.bfloat16, generator=gen) / 64
        y = ops.all_gather_matmul(x, w, g)
        ops.synchronize(g)
        full = x.reshape(-1, k).float()
        ref = torch.stack([full @ w[r].float() for r in range(world)])
    else:
        x = torch.randn(world, world * rows, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        w = torch.randn(world, k, n, device="cuda", dtype=torch.bfloat16, generator=gen) / 64
        y = ops.matmul_reduce_scatter(x, w, g)
        ops.synchronize(g)
        total = sum(x[r].float() @ w[r].float() for r in range(world))
        ref = total.reshape(world, rows, n)
    return float((y.float() - ref).norm() / ref.norm())


def run(out: str, cache: str | None) -> None:
    os.environ["OVL_CACHE_DIR"] = cache or tempfile.mkdtemp(prefix="ovl-tune-cache-")
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the tuner says what it chose, and why
    import torch
    import triton
    from ovl_runtime import ops
    from ovl_runtime._tune import tuner
    from ovl_runtime.groups import OneGpuGroup

    ops.tune(top_k=TOP_K)
    rows_out = []
    for op, world, rows, n, k in SHAPES:
        g = OneGpuGroup(world)
        t0 = time.monotonic()
        err = call(op, g, world, rows, n, k)
        first_s = time.monotonic() - t0
        rec = next((r for r in ops.tuned() if r.entry.startswith(f"{op}|w{world}|") and f"|n{n}|k{k}|" in r.entry), None)
        # A new process: nothing in memory, the cache on disk.
        ops.close_all(force=True)
        tuner.forget()
        t1 = time.monotonic()
        err2 = call(op, g, world, rows, n, k)
        again_s = time.monotonic() - t1
        again = next((r for r in ops.tuned() if rec is not None and r.entry == rec.entry), None)
        ops.close_all(force=True)
        row: dict[str, Any] = {
            "op": op,
            "world": world,
            "rowsPerRank": rows,
            "N": n,
            "K": k,
            "firstCallS": first_s,
            "cachedFirstCallS": again_s,
            "relErr": err,
            "relErrCached": err2,
            "fromCache": again is not None and again.origin == "cache",
            "record": rec.to_json() if rec else None,
        }
        rows_out.append(row)
        print(json.dumps({k2: v for k2, v in row.items() if k2 != "record"}), flush=True)
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "topK": TOP_K,
        "cache": os.environ["OVL_CACHE_DIR"],
        "shapes": rows_out,
        "note": "ranks share one GPU (OneGpuGroup): the first-call seconds are what tuning costs; the tuner's times are of one rank's GEMM alone on the whole GPU",
    }
    Path(out).write_text(json.dumps(result, indent=1))
    print(f"\n{result['device']}  torch {result['torch']}  triton {result['triton']}")
    print(f"{'shape':34s} {'table':>6s} {'tuned':>6s} {'tune s':>7s} {'cached s':>8s} {'rel err':>8s}  chosen")
    for r in rows_out:
        rec = r["record"]
        name = f"{r['op']} w{r['world']} r{r['rowsPerRank']} n{r['N']} k{r['K']}"
        if rec is None:
            print(f"{name:34s} not tuned (see the log)  {r['firstCallS']:7.1f} {r['cachedFirstCallS']:8.1f} {r['relErr']:8.1e}")
            continue
        table = f"{rec['cublas_ms'] / rec['table_ms']:6.3f}" if rec["table_ms"] else f"{'-':>6s}"
        chosen = (
            "= table pick"
            if rec["table_chosen"]
            else " ".join(str(rec["chosen"][x]) for x in ("body", "BM", "BN", "BK", "groupM", "numStages", "numWarps"))
        )
        print(
            f"{name:34s} {table} {rec['cublas_ms'] / rec['ms']:6.3f} {rec['seconds']:7.1f} {r['cachedFirstCallS']:8.1f} "
            f"{max(r['relErr'], r['relErrCached']):8.1e}  {chosen}{'' if r['fromCache'] else '  (NOT from the cache)'}"
        )
    print("table / tuned: cuBLAS ms / the GEMM kernel's ms, as the tuner measured them (medians, L2 flushed)")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare").add_argument("into")
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--cache", help="the tuning cache directory (default: a fresh one, so every shape is tuned)")
    a = p.parse_args()
    if a.cmd == "prepare":
        prepare(a.into)
    else:
        run(a.out, a.cache)


if __name__ == "__main__":
    sys.exit(main())
