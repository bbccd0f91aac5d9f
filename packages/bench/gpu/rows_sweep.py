"""Each operator compiled once for every row count, swept over row counts: what compiles after warm-up, which path
each M takes, and whether each result is right; every rank on one GPU (``OneGpuGroup``).

    OVL_CLI="node packages/cli/dist/bin.js" python3 packages/bench/gpu/rows_sweep.py prepare out-kern   # no GPU
    OVL_KERNELS=out-kern python3 packages/bench/gpu/rows_sweep.py run --out rows.json                   # GPU

The torch API binds AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce and AllToAll+GEMM as operators for every row
count (``KernelKey.rows``, ``ovl emit <op> --any-rows``). After a warm-up at two row counts, each is called at row
counts from 64 to 16380 that are not powers of two, counting ovl compiles (the kernel library's ``compile_key``) and
Triton JIT compiles (``triton.knobs.runtime.jit_cache_hook``): both must stay 0. Each M is checked against float32
torch on fresh inputs and timed eagerly beside the operator's plain sequence (``_runner.rows_plain.PLAIN``); the
ranks share one GPU, so the times check the path, they are not performance figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from references import reference

WORLD = 4
WARM = (4096, 8192)
SWEEP = (64, 200, 1028, 2052, 3000, 4104, 5996, 8196, 10000, 12288, 16380)


@dataclass(frozen=True)
class Case:
    """One operator at MLP-1's per-rank sizes at world 4 (hidden 4096, intermediate 11008)."""

    op: str
    fn: str  # the ``ovl_runtime.ops`` function
    n: int
    k: int
    #: Rows of one rank's ``x`` for a call of M rows.
    x_rows: Callable[[int], int]


CASES = (
    Case("ag-gemm", "all_gather_matmul", 11008 // WORLD, 4096, lambda M: M // WORLD),
    Case("gemm-rs", "matmul_reduce_scatter", 4096, 11008 // WORLD, lambda M: M),
    Case("gemm-ar", "matmul_all_reduce", 4096, 11008 // WORLD, lambda M: M),
    Case("a2a-gemm", "all_to_all_matmul", 4096, 4096, lambda M: M),
)


def timed(fn: Callable[[], Any]) -> float:
    """Median ms of 10 eager calls, each waited for (the bench's one timer)."""
    from timer import event_times

    return statistics.median(event_times(fn, 10, warmup=1, sync_each=True))


def sweep(case: Case, compiles: dict[str, int]) -> dict[str, Any]:
    """Warm ``case``'s operator up, then call it at every M of ``SWEEP``; the compiles counted from the warm-up on."""
    import torch
    from ovl_runtime import ops
    from ovl_runtime._runner.rows_plain import PLAIN
    from ovl_runtime.groups import OneGpuGroup

    g = OneGpuGroup(WORLD)
    f = getattr(ops, case.fn)
    w = torch.randn(WORLD, case.k, case.n, device="cuda", dtype=torch.bfloat16) / 64

    def inputs(M: int) -> Any:
        return torch.randn(WORLD, case.x_rows(M), case.k, device="cuda", dtype=torch.bfloat16)

    for M in WARM:
        f(inputs(M), w, g)
    ops.synchronize(g)
    op = next(o for o in ops.operators() if getattr(o, "m", None) is not None and o.m.reference.operator == case.op)
    before = dict(compiles)
    plain = PLAIN[case.op]
    rows = []
    for M in SWEEP:
        x = inputs(M)
        y = f(x, w, g)
        ops.synchronize(g)
        ref = reference(case.fn, x, w)
        err = ((y.float() - ref).norm() / ref.norm()).item()
        out = torch.empty_like(y)
        ovl_ms = timed(lambda x=x: f(x, w, g))
        plain_ms = timed(lambda x=x, out=out: plain.run(x, w, out, g))
        row = {"M": M, "path": op.path(M), "maxRelErr": err, "ovlMs": ovl_ms, "plainMs": plain_ms}
        rows.append(row)
        print(json.dumps({"op": case.op, **row}), flush=True)
    ops.synchronize(g)
    described = op.describe()
    ops.close_all(force=True)
    return {
        "op": case.op,
        "world": WORLD,
        "N": case.n,
        "K": case.k,
        "warmup": WARM,
        "compilesAfterWarmup": {k: compiles[k] - before[k] for k in compiles},
        "operator": described,
        "rows": rows,
    }


def run(out: str) -> None:
    import torch
    import triton
    from ovl_runtime._kernels import library

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
    results = [sweep(c, compiles) for c in CASES]
    result = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "operators": results,
        "note": "every rank on one GPU: times check the path, they are not performance figures",
    }
    Path(out).write_text(json.dumps(result, indent=1))
    print(f"{'op':>9} {'M':>6} {'path':>14} {'max rel err':>12} {'ovl ms':>8} {'plain ms':>9}")
    for r in results:
        for x in r["rows"]:
            print(f"{r['op']:>9} {x['M']:>6} {x['path'][:14]:>14} {x['maxRelErr']:>12.2e} {x['ovlMs']:>8.3f} {x['plainMs']:>9.3f}")
    for r in results:
        c = r["compilesAfterWarmup"]
        print(f"{r['op']}: compiles after warm-up: ovl {c['ovl']}, triton {c['triton']}")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare").add_argument("into")
    sub.add_parser("run").add_argument("--out", required=True)
    a = p.parse_args()
    if a.cmd == "prepare":
        from ovl_runtime._kernels.library import ensure_compiled, rows_key

        for c in CASES:
            print(ensure_compiled(rows_key(c.op, WORLD, c.n, c.k), Path(a.into)))
        return
    run(a.out)


if __name__ == "__main__":
    sys.exit(main())
