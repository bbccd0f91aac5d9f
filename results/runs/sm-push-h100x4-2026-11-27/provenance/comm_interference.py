"""Diagnostic: how much does NVLink traffic slow a GEMM on the GPU it leaves or enters, and do the clocks drop?

One process, GPUs 0 and 1. GPU 0 runs cuBLAS GEMMs (MLP-1's GEMM+RS per-rank shape at world 4) back to back for
a few seconds while copy-engine copies of 8 MiB run continuously on side streams: none; out of GPU 0 into GPU 1;
into GPU 0 from GPU 1; both ways. Per case: GPU 0's mean GEMM time, the copies' rate, and GPU 0's SM clock and
power as nvidia-smi sampled them (every 100 ms) over the case.

    python3 packages/bench/gpu/diag/comm_interference.py [seconds per case]

Read its figures with care: the copies are enqueued from Python between the timed GEMMs, which leaves the GPU
idle at times, and the GEMM loop alone runs at the power limit, so idle gaps raise the clocks
(`packages/bench/results/gpu/sm-push-h100x4-2026-11-27/`).
"""

import statistics
import subprocess
import sys
import time

import torch

COPIES = 48


def sampler() -> subprocess.Popen:
    return subprocess.Popen(
        ["nvidia-smi", "--id=0", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "100"],
        stdout=subprocess.PIPE,
        text=True,
    )


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    a = torch.randn(8192, 2752, device=d0, dtype=torch.bfloat16)
    b = torch.randn(2752, 4096, device=d0, dtype=torch.bfloat16)
    c = torch.empty(8192, 4096, device=d0, dtype=torch.bfloat16)
    n = 8 << 20
    src0, dst0 = torch.empty(n, dtype=torch.uint8, device=d0), torch.empty(n, dtype=torch.uint8, device=d0)
    src1, dst1 = torch.empty(n, dtype=torch.uint8, device=d1), torch.empty(n, dtype=torch.uint8, device=d1)
    out_stream = torch.cuda.Stream(d0)
    in_stream = torch.cuda.Stream(d1)
    rows = []
    for case in ("none", "out of GPU 0", "into GPU 0", "both ways"):
        out_on = case in ("out of GPU 0", "both ways")
        in_on = case in ("into GPU 0", "both ways")
        for _ in range(3):
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize(d0)
        torch.cuda.synchronize(d1)
        smi = sampler()
        time.sleep(0.3)
        copies = {"out": 0, "in": 0}
        gemms = []
        t_end = time.time() + seconds
        copy_start = time.time()
        while time.time() < t_end:
            # Enough copies queued on each side stream to outlast the four timed GEMMs (~1.2 ms at ~300 GB/s).
            if out_on:
                with torch.cuda.stream(out_stream):
                    for _ in range(COPIES):
                        dst1.copy_(src0, non_blocking=True)
                        copies["out"] += 1
            if in_on:
                with torch.cuda.stream(in_stream):
                    for _ in range(COPIES):
                        dst0.copy_(src1, non_blocking=True)
                        copies["in"] += 1
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(4):
                torch.matmul(a, b, out=c)
            e.record()
            e.synchronize()
            gemms.append(s.elapsed_time(e) / 4)
        torch.cuda.synchronize(d0)
        torch.cuda.synchronize(d1)
        copy_s = time.time() - copy_start
        smi.terminate()
        samples = [line.split(",") for line in smi.communicate()[0].strip().splitlines() if "," in line]
        clocks = [float(x[0]) for x in samples if x[0].strip().replace(".", "").isdigit()]
        power = [float(x[1]) for x in samples if x[1].strip().replace(".", "").isdigit()]
        rows.append(
            (
                case,
                statistics.mean(gemms[1:]) if len(gemms) > 1 else float("nan"),
                copies["out"] * n / copy_s / 1e9,
                copies["in"] * n / copy_s / 1e9,
                statistics.median(clocks) if clocks else float("nan"),
                statistics.median(power) if power else float("nan"),
            )
        )
    print(f"{torch.cuda.get_device_name(0)}: GEMM 8192x4096x2752 bf16 (cuBLAS) on GPU 0, {seconds:.0f} s per case")
    print("| copies | GEMM (ms) | out of GPU 0 (GB/s) | into GPU 0 (GB/s) | GPU 0 SM clock (MHz, median) | GPU 0 power (W, median) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for case, g, o, i, clk, pw in rows:
        print(f"| {case} | {g:.3f} | {o:.0f} | {i:.0f} | {clk:.0f} | {pw:.0f} |")


if __name__ == "__main__":
    main()
