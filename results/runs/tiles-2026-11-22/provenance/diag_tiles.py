"""Diagnostic: the emitted persistent TMA GEMM (the AG+GEMM consumer with no waits) alone,
per tile shape and launch configuration, beside cuBLAS, on one GPU.

The autotuner searches tile shapes; the hardware model needs to know what each costs. This
times `ag_gemm_consumer` (the committed golden module, every slot -1: local rows, no wait)
over the problems the suite and the tuner emit, for tiles BM×BN×BK and (num_warps,
num_stages), checks each result against torch, and writes one JSON.

    python3 packages/bench/gpu/diag/diag_tiles.py [--json OUT.json]
"""
import argparse
import importlib.util
import json
import os

import torch
import triton
from timing import median_ms

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "packages", "tlx-emitter", "src", "kernels", "__golden__", "ag_gemm_consumer.py")

# (label, M, N, K): AG+GEMM MLP-1/2/5 at worlds 2 and 4, GEMM+RS MLP-1/2 at worlds 2 and 4.
PROBLEMS = [
    ("ag_mlp1_w2", 8192, 5504, 4096), ("ag_mlp1_w4", 8192, 2752, 4096), ("ag_mlp2_w4", 8192, 3584, 4096),
    ("ag_mlp5_w2", 8192, 14336, 8192), ("rs_mlp1_w2", 8192, 4096, 5504), ("rs_mlp2_w4", 8192, 4096, 3584),
]
TILES = [(128, 256, 64), (128, 128, 64), (256, 128, 64), (64, 256, 64), (128, 64, 64), (64, 128, 64)]
LAUNCH = [(8, 3), (4, 3), (4, 4), (8, 4)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("ovl_diag_consumer", SRC)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernel = mod.ag_gemm_consumer
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sig = torch.zeros(1, dtype=torch.int32, device="cuda")
    err = torch.zeros(8, dtype=torch.int32, device="cuda")
    rows = []
    for label, M, N, K in PROBLEMS:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = a @ b
        t_cublas = median_ms(lambda: torch.matmul(a, b, out=c))
        rows.append({"problem": label, "M": M, "N": N, "K": K, "kernel": "cublas", "ms": t_cublas})
        print(f"{label} ({M}x{N}x{K}): cuBLAS {t_cublas:.4f} ms", flush=True)
        for bm, bn, bk in TILES:
            num_pid_m = triton.cdiv(M, bm)
            order = torch.arange(num_pid_m, dtype=torch.int32, device="cuda")
            slots = torch.full((num_pid_m,), -1, dtype=torch.int32, device="cuda")
            tiles = num_pid_m * triton.cdiv(N, bn)
            grid = (min(sms, tiles),)
            for warps, stages in LAUNCH:
                c.fill_(0)

                def go():
                    kernel[grid](a, b, c, order, slots, sig, err, M, N, K, 0, 0, 1_000_000_000,
                                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)

                try:
                    go()
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - a configuration that does not fit is recorded
                    rows.append({"problem": label, "kernel": "triton", "tile": [bm, bn, bk], "warps": warps, "stages": stages, "error": str(exc)[:200]})
                    print(f"  {bm}x{bn}x{bk} w{warps} s{stages}: {type(exc).__name__}", flush=True)
                    continue
                rel = float((c.float() - ref.float()).norm() / ref.float().norm())
                t = median_ms(go)
                rows.append({"problem": label, "M": M, "N": N, "K": K, "kernel": "triton", "tile": [bm, bn, bk], "warps": warps,
                             "stages": stages, "programs": grid[0], "ms": t, "relErr": rel, "vsCublas": t_cublas / t})
                print(f"  {bm}x{bn}x{bk} w{warps} s{stages}: {t:.4f} ms ({100 * t_cublas / t:.0f}% of cuBLAS) rel.err {rel:.1e}", flush=True)
        del a, b, c, ref
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
