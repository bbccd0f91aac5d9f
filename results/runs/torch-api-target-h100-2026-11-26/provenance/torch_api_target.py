"""The torch API on the GPU's own tuned table (``OVL_TARGET``): AllGather+GEMM at per-rank shapes the H100
table gives the stream-K body, every rank on this one GPU (``OneGpuGroup``), eager and replayed from a
CUDA graph, each checked against ``cat(x) @ w`` in fp32. Prints which kernel each key's manifest runs.

    OVL_TARGET=h100 OVL_KERNELS=<library> PYTHONPATH=packages/runtime-py/src python3 packages/bench/gpu/diag/torch_api_target.py
    (the library: OVL_TARGET=h100 OVL_CLI=... python3 packages/bench/gpu/diag/torch_api_target.py --prepare <dir>, where Node is)
"""

from __future__ import annotations

import sys
from pathlib import Path

# (world, rows per rank, N, K): MLP-6's AllGather+GEMM per-rank N at worlds 2 and 8 (8192 gathered rows).
CASES = [(2, 4096, 14784, 8192), (8, 1024, 3696, 8192)]


def keys():
    from ovl_runtime import kernel_library as lib

    return [lib.KernelKey("ag-gemm", w, w * m, n, k) for w, m, n, k in CASES]


def main() -> int:
    from ovl_runtime import kernel_library as lib

    if len(sys.argv) == 3 and sys.argv[1] == "--prepare":
        for key in keys():
            print(lib.ensure_compiled(key, Path(sys.argv[2])))
        return 0
    import torch
    from ovl_runtime import ops
    from ovl_runtime.groups import OneGpuGroup

    worst = 0.0
    for (w, m, n, k), key in zip(CASES, keys(), strict=True):
        manifest = lib.manifest_for(key)
        g = OneGpuGroup(w)
        gen = torch.Generator(device="cuda").manual_seed(w)
        x = torch.randn(w, m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        wt = (
            torch.randn(w, k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
            / k**0.5
        )
        full = x.reshape(w * m, k).float()
        ref = torch.stack([full @ wt[r].float() for r in range(w)])
        y = ops.all_gather_matmul(x, wt, g)
        torch.cuda.synchronize()
        eager = ((y.float() - ref).norm() / ref.norm()).item()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            yg = ops.all_gather_matmul(x, wt, g)
        x.copy_(
            torch.randn(w, m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        )
        graph.replay()
        torch.cuda.synchronize()
        full = x.reshape(w * m, k).float()
        ref = torch.stack([full @ wt[r].float() for r in range(w)])
        replayed = ((yg.float() - ref).norm() / ref.norm()).item()
        worst = max(worst, eager, replayed)
        print(
            f"{key.dirname}: kernel {manifest.kernels[0].entry}, rel err eager {eager:.2e}, graph replay {replayed:.2e}",
            flush=True,
        )
    print("ok" if worst < 2e-2 else f"FAIL: rel err {worst:.2e}")
    return 0 if worst < 2e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
