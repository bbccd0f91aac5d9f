"""One AllGather+GEMM operator swept over row counts: what compiles after warm-up, which path each M takes, and
whether each result is right; every rank on one GPU (``OneGpuGroup``).

    OVL_CLI="node packages/cli/dist/bin.js" python3 packages/bench/gpu/rows_sweep.py prepare out-kern   # no GPU
    OVL_KERNELS=out-kern python3 packages/bench/gpu/rows_sweep.py run --out rows.json                   # GPU

The operator is compiled once for every row count (``KernelKey.rows``, ``ovl emit ag-gemm --any-rows``). After a
warm-up at two row counts, the sweep calls it at row counts that are not powers of two, counting ovl compiles (the
kernel library's ``compile_key``) and Triton JIT compiles (``triton.knobs.runtime.jit_cache_hook``): both must stay
0. Each M is checked against float32 torch on fresh inputs and timed eagerly beside the plain sequence (gather then
one batched matmul); the ranks share one GPU, so the times check the path, they are not performance figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

WORLD, N, K = 4, 2752, 4096  # MLP-1's AllGather+GEMM at world 4
WARM = (4096, 8192)
SWEEP = (1028, 2052, 3000, 4104, 5996, 8196, 10000, 12288, 16380)


def key() -> Any:
    from ovl_runtime._kernels.library import rows_key

    return rows_key("ag-gemm", WORLD, N, K)


def run(out: str) -> None:
    import torch
    import triton
    from ovl_runtime import ops
    from ovl_runtime._kernels import library
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(WORLD)
    w = torch.randn(WORLD, K, N, device="cuda", dtype=torch.bfloat16) / 64

    def call(M: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(WORLD, M // WORLD, K, device="cuda", dtype=torch.bfloat16)
        return x, ops.all_gather_matmul(x, w, g)

    for M in WARM:
        call(M)
    ops.synchronize(g)
    compiles = {"ovl": 0, "triton": 0}
    real_compile = library.compile_key

    def counted(*a: Any, **kw: Any) -> Any:
        compiles["ovl"] += 1
        return real_compile(*a, **kw)

    library.compile_key = counted  # type: ignore[assignment]

    def jit_hook(*_a: Any, **_kw: Any) -> bool:
        compiles["triton"] += 1
        return False

    triton.knobs.runtime.jit_cache_hook = jit_hook
    rows = []
    op = next(o for o in ops.operators() if hasattr(o, "path"))
    for M in SWEEP:
        x, y = call(M)
        ops.synchronize(g)
        full = x.reshape(-1, K).float()
        ref = torch.stack([full @ w[r].float() for r in range(WORLD)])
        err = ((y.float() - ref).norm() / ref.norm()).item()

        def timed(fn: Any) -> float:
            ts = []
            for _ in range(10):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b))
            return statistics.median(ts)

        ovl_ms = timed(lambda x=x: ops.all_gather_matmul(x, w, g))
        plain_ms = timed(lambda x=x: torch.matmul(x.reshape(-1, K).unsqueeze(0), w))
        row = {"M": M, "path": op.path(M), "maxRelErr": err, "ovlMs": ovl_ms, "plainMs": plain_ms}
        rows.append(row)
        print(json.dumps(row), flush=True)
    ops.synchronize(g)
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "world": WORLD,
        "N": N,
        "K": K,
        "warmup": WARM,
        "compilesAfterWarmup": compiles,
        "operator": op.describe(),
        "rows": rows,
        "note": "every rank on one GPU: times check the path, they are not performance figures",
    }
    Path(out).write_text(json.dumps(result, indent=1))
    print(f"{'M':>6} {'path':>14} {'max rel err':>12} {'ovl ms':>8} {'plain ms':>9}")
    for r in rows:
        print(f"{r['M']:>6} {r['path'][:14]:>14} {r['maxRelErr']:>12.2e} {r['ovlMs']:>8.3f} {r['plainMs']:>9.3f}")
    print(f"compiles after warm-up: ovl {compiles['ovl']}, triton {compiles['triton']}")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare").add_argument("into")
    sub.add_parser("run").add_argument("--out", required=True)
    a = p.parse_args()
    if a.cmd == "prepare":
        from ovl_runtime._kernels.library import ensure_compiled

        print(ensure_compiled(key(), Path(a.into)))
        return
    run(a.out)


if __name__ == "__main__":
    sys.exit(main())
