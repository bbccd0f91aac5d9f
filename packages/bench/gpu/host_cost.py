"""Host cost of an eager call of the torch API, per rank, on one GPU with every rank in one process.

    OVL_CLI="node packages/cli/dist/bin.js" python3 packages/bench/gpu/host_cost.py prepare out-kern   # no GPU: compile
    OVL_KERNELS=out-kern python3 packages/bench/gpu/host_cost.py run --out host.json                   # GPU

``run`` (with ``OVL_ANY_ROWS=0``: each operator compiled for its row count) measures, for each operator at worlds 2, 4
and 8 with tiny shapes (the GPU keeps up, so the host's time is what is measured): the host time to enqueue one eager
call (median over rounds of back-to-back calls, divided by the world: per rank), with the operator replaying its own
graph and with every call launched directly (``OVL_EAGER_GRAPH=0``, each mode in a process of its own); a replay of the
same call from a graph the caller captured; and a torch matmul per rank for scale. A third process measures the
operators as the torch API binds them by default (``rows``: compiled once for every row count) at MLP-1's sizes and
2048 rows per rank, above the crossover where they overlap (at the tiny shapes they would run the plain sequence);
there the GPU lags the host, whose enqueue time is what is measured. Before timing, each operator's
own-graph calls are checked against a float32 torch reference on fresh inputs, fresh weights and fresh
outputs (their addresses change every call). The GPU times of ranks sharing one GPU are not performance
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from references import reference

WORLDS = (2, 4, 8)
ROWS, K, N = 128, 512, 256  # per rank: tiny, so the GPU keeps up with the host
CALLS, ROUNDS, CHECKS = 50, 7, 4
OPS = ("all_gather_matmul", "matmul_reduce_scatter", "matmul_all_reduce", "all_to_all_matmul")
NAMES = {
    "all_gather_matmul": "ag-gemm",
    "matmul_reduce_scatter": "gemm-rs",
    "matmul_all_reduce": "gemm-ar",
    "all_to_all_matmul": "a2a-gemm",
}
#: The ``rows`` mode: rows per rank, and each operator's (K, N) at MLP-1 (hidden 4096, intermediate 11008) at world 4.
ROWS_BIG = 2048
MLP1 = {
    "all_gather_matmul": (4096, 2752),
    "matmul_reduce_scatter": (2752, 4096),
    "matmul_all_reduce": (2752, 4096),
    "all_to_all_matmul": (4096, 4096),
}


def shapes(op: str, world: int, mode: str = "graph") -> tuple[tuple[int, int], tuple[int, int]]:
    """One rank's ``x`` and ``w`` shapes in ``mode``."""
    rows, (k, n) = (ROWS_BIG, MLP1[op]) if mode == "rows" else (ROWS, (K, N))
    if op == "all_gather_matmul":
        return (rows, k), (k, n)
    return (rows * world, k), (k, n)  # rs / ar / a2a: every rank holds all rows of its slice


def keys(op: str, world: int) -> list[Any]:
    """The per-M key of the tiny shape and the key for every row count of the ``rows`` mode."""
    from ovl_runtime._kernels.library import KernelKey, rows_key

    (m, k), (_, n) = shapes(op, world)
    rows = world * m if op == "all_gather_matmul" else m
    (_, kb), (_, nb) = shapes(op, world, "rows")
    return [KernelKey(NAMES[op], world, rows, n, k, "bf16"), rows_key(NAMES[op], world, nb, kb)]


def bound_parts(b: Any) -> list[Any]:
    """The bound operators behind a torch-API operator (an any-row-count one holds one per row count it ran)."""
    return list(b.bound.values()) if hasattr(b, "bound") else [b]


def host_us(fn: Any) -> float:
    """Median over rounds of the host's time to enqueue one call of ``fn``, in µs."""
    import torch

    out = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        out.append((time.perf_counter() - t0) / CALLS * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def measure(mode: str) -> dict[str, Any]:
    import torch
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    res: dict[str, Any] = {"mode": mode, "cases": []}
    for world in WORLDS:
        g = OneGpuGroup(world)
        for op in OPS:
            fn = getattr(ops, op)
            (m, k), (k2, n) = shapes(op, world, mode)
            x = torch.randn(world, m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(world, k2, n, device="cuda", dtype=torch.bfloat16) / 16
            fn(x, w, g)
            ops.synchronize(g)
            errs = []
            if mode != "direct":  # fresh inputs, weights and outputs each call: every bound address moves
                kept = []
                for _ in range(CHECKS):
                    xc = torch.randn_like(x)
                    wc = torch.randn_like(w) / 16
                    y = fn(xc, wc, g)
                    kept.append((xc, wc, y))
                ops.synchronize(g)
                for xc, wc, y in kept:
                    ref = reference(op, xc, wc)
                    errs.append(((y.float() - ref).norm() / ref.norm()).item())
            mine = [b for b in ops.operators() if b.group is g or getattr(b.group, "name", None) == g.name]
            paths = sorted({b.path(x.shape[-2] * (world if op == "all_gather_matmul" else 1)) for b in mine if hasattr(b, "path")})
            bound = [p for b in mine for p in bound_parts(b)]
            own = [b.own is not None for b in bound]
            reasons = sorted({b.direct_reason for b in bound if b.direct_reason})
            eager = host_us(lambda fn=fn, x=x, w=w, g=g: fn(x, w, g))
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn(x, w, g)
            replay = host_us(graph.replay)
            ops.synchronize(g)
            case = {
                "op": op,
                "world": world,
                "x": list(x.shape),
                "w": list(w.shape),
                "eagerHostUsPerCall": eager,
                "eagerHostUsPerRank": eager / world,
                "userGraphReplayHostUsPerCall": replay,
                "ownGraph": all(own) and bool(own),
                "directReasons": reasons,
                "rowsPaths": paths,
                "maxRelErr": max(errs) if errs else None,
            }
            res["cases"].append(case)
            print(json.dumps(case), flush=True)
            del graph
            ops.close_all(force=True)
            torch.cuda.synchronize()
    a = torch.randn(ROWS * 4, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    res["torchMatmulHostUs"] = host_us(lambda: a @ b)
    return res


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("prepare")
    pr.add_argument("into")
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--mode", choices=["graph", "direct", "rows", "both"], default="both", help="both: all three")
    a = p.parse_args()
    if a.cmd == "prepare":
        from pathlib import Path

        from ovl_runtime._kernels.library import ensure_compiled

        for world in WORLDS:
            for op in OPS:
                for key in keys(op, world):
                    print(ensure_compiled(key, Path(a.into)))
        return
    if a.mode != "both":
        result = measure(a.mode)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
        return
    import torch

    runs = {}
    for mode in ("direct", "graph", "rows"):
        # direct, graph: the operator of each row count (not the one for every row count, which at these tiny shapes
        # runs the plain sequence: the simulator says overlapping loses there), so that every operator measured is an
        # overlapped one. rows: the one for every row count, as the torch API binds it, where it overlaps.
        env = dict(os.environ, OVL_EAGER_GRAPH="0" if mode == "direct" else "1", OVL_ANY_ROWS="1" if mode == "rows" else "0")
        path = f"{a.out}.{mode}.json"
        subprocess.run([sys.executable, __file__, "run", "--mode", mode, "--out", path], env=env, check=True)
        with open(path) as f:
            runs[mode] = json.load(f)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rowsPerRank": ROWS, "K": K, "N": N, "runs": runs}
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{'op':24} {'world':>5} {'direct us/rank':>15} {'own graph us/rank':>18} {'user replay us/call':>20} {'max rel err':>12}")
    for d, gcase in zip(runs["direct"]["cases"], runs["graph"]["cases"]):
        err = gcase["maxRelErr"]
        print(
            f"{d['op']:24} {d['world']:>5} {d['eagerHostUsPerRank']:>15.1f} {gcase['eagerHostUsPerRank']:>18.1f} "
            f"{gcase['userGraphReplayHostUsPerCall']:>20.1f} {err if err is not None else float('nan'):>12.2e}"
            + ("" if gcase["ownGraph"] else f"  direct: {gcase['directReasons']}")
        )
    print(f"torch matmul host us per call: {runs['graph']['torchMatmulHostUs']:.1f}")
    print(f"\nfor every row count, as bound by default ({ROWS_BIG} rows per rank, MLP-1's K and N):")
    print(f"{'op':24} {'world':>5} {'own graph us/rank':>18} {'user replay us/call':>20} {'max rel err':>12}  path")
    for c in runs["rows"]["cases"]:
        err = c["maxRelErr"]
        print(
            f"{c['op']:24} {c['world']:>5} {c['eagerHostUsPerRank']:>18.1f} {c['userGraphReplayHostUsPerCall']:>20.1f} "
            f"{err if err is not None else float('nan'):>12.2e}  {'; '.join(c['rowsPaths'])}"
            # The plain sequence binds no operator (no own graph to speak of).
            + ("" if c["ownGraph"] or c["rowsPaths"] != ["overlapped"] else f"  direct: {c['directReasons']}")
        )


if __name__ == "__main__":
    main()
