"""Turns baselines JSON files (from baselines.py) into one markdown report.

python3 packages/bench/gpu/summarize.py baselines-*.json > README.md   (as results/runs/baselines-h200-2026-11-22/ was written)
"""

from __future__ import annotations

import json
import sys


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def main(paths: list[str]) -> None:
    reports = sorted((json.load(open(p)) for p in paths), key=lambda r: r["world"])
    if not reports:
        raise SystemExit("usage: summarize.py BASELINES.json...")
    first = reports[0]
    print("# Baselines: GEMM, collective, not overlapped, PyTorch async-TP\n")
    print(
        f"Device: {first['device']} ×{', '.join(str(r['world']) for r in reports)} (one machine, "
        f"one run per world size, {first['date']}); torch {first['torch']}; {first['dtype']}; "
        f"{first['timing']}; {first['warmup']} warm-up, {first['reps']} timed runs.\n"
    )
    print("Reproduce: `torchrun --nproc_per_node=W packages/bench/gpu/baselines.py --reps 20 --out FILE` ")
    print("(with `CUDA_VISIBLE_DEVICES` selecting W GPUs), then this script.\n")
    print(
        "All times in ms per rank. *bound* = max(GEMM alone, collective alone), the time of a "
        "perfectly overlapped operator at these kernels' speed.\n"
    )
    for r in reports:
        print(f"## World {r['world']}\n")
        print("| shape | op | GEMM alone | collective alone | not overlapped | async-TP | bound | not overlapped ÷ bound |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for m in r["mlp"]:
            bound = max(m["gemm_ms"], m["collective_ms"])
            print(
                f"| {m['shape']} | {m['op']} | {fmt(m['gemm_ms'])} | {fmt(m['collective_ms'])} | "
                f"{fmt(m['not_overlapped_ms'])} | {fmt(m.get('async_tp_ms'))} | {fmt(bound)} | "
                f"{m['not_overlapped_ms'] / bound:.2f} |"
            )
        cal = r.get("calibration")
        if cal:
            print("\nCalibration (rank → next rank):\n")
            print("| copy-engine push | " + " | ".join(f"{c['bytes'] >> 10} KiB" for c in cal["copy_engine"]) + " |")
            print("| --- | " + " | ".join("---:" for _ in cal["copy_engine"]) + " |")
            print("| ms | " + " | ".join(f"{c['ms']:.4f}" for c in cal["copy_engine"]) + " |")
            print("| GB/s | " + " | ".join(f"{c['GBps']:.1f}" for c in cal["copy_engine"]) + " |")
            if "stream_write_value32_us" in cal:
                print(
                    f"\nStream-written signal (host-issued `stream_write_value32`, 1000 in a row): "
                    f"{cal['stream_write_value32_us']:.2f} µs each.\n"
                )
            print("| GEMM rows M (K=4096, N=11008/W) | " + " | ".join(str(g["M"]) for g in cal["gemm_rows"]) + " |")
            print("| --- | " + " | ".join("---:" for _ in cal["gemm_rows"]) + " |")
            print("| ms | " + " | ".join(f"{g['ms']:.4f}" for g in cal["gemm_rows"]) + " |")
            print("| TFLOP/s | " + " | ".join(f"{g['TFLOPs']:.0f}" for g in cal["gemm_rows"]) + " |")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
