"""Baselines and calibration for overlapped GEMM+collective operators, measured on GPUs.

Run under torchrun, one process per GPU:
    torchrun --nproc_per_node=N packages/bench/gpu/baselines.py --out results.json
For every shape of the MLP suite (TileLink Table 4) it times, per rank, with CUDA events
(median after warm-up, max over ranks): the GEMM alone (cuBLAS), the collective alone
(NCCL), both in sequence (not overlapped) and PyTorch's async-TP fused op. It also measures
calibration data for the simulator's GPU model: copy-engine peer-copy time against
transfer size, the cost of a stream-written signal, and GEMM time against row count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

# NVLink multicast can take a shared host's GPUs down: never use it.
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("TORCH_SYMMMEM", "CUDA")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from timer import event_times, slowest_rank_median  # noqa: E402

MLP = {
    "MLP-1": (8192, 4096, 11008),
    "MLP-2": (8192, 4096, 14336),
    "MLP-3": (8192, 3584, 14336),
    "MLP-4": (8192, 4608, 36864),
    "MLP-5": (8192, 8192, 28672),
    "MLP-6": (8192, 8192, 29568),
}


def timed(fn, warmup: int, reps: int, batch: int = 1) -> float:
    """Median milliseconds a call of `fn` over `reps` runs, each started after a barrier and bracketed by CUDA
    events (the one timer, ``timer.event_times``); the slowest rank's median. A run is `batch` calls back to back
    (as a training loop runs its steps)."""
    return slowest_rank_median(event_times(fn, reps, warmup=warmup, batch=batch, before=dist.barrier, sync_each=True))


def log(msg: str) -> None:
    if dist.get_rank() == 0:
        print(msg, file=sys.stderr, flush=True)


def ag_gemm_row(name, g, warmup, reps, world, group_name):
    """AllGather + GEMM: A[S/W x H] gathered, times B[H x I/W]; its tensors are freed on return."""
    S, H, I = MLP[name]  # noqa: E741 - TileLink's names: tokens, hidden, intermediate
    a_shard = torch.randn(S // world, H, device="cuda", dtype=torch.bfloat16, generator=g)
    a_full = torch.empty(S, H, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(H, I // world, device="cuda", dtype=torch.bfloat16, generator=g)
    row = {"shape": name, "op": "AG+GEMM", "S": S, "H": H, "I": I}
    row["gemm_ms"] = timed(lambda: a_full @ b, warmup, reps)
    row["collective_ms"] = timed(lambda: dist.all_gather_into_tensor(a_full, a_shard), warmup, reps)

    def ag_then_gemm():
        dist.all_gather_into_tensor(a_full, a_shard)
        return a_full @ b

    row["not_overlapped_ms"] = timed(ag_then_gemm, warmup, reps)
    try:
        op = torch.ops.symm_mem.fused_all_gather_matmul
        row["async_tp_ms"] = timed(lambda: op(a_shard, [b], 0, group_name), warmup, reps)
    except Exception as exc:  # noqa: BLE001
        row["async_tp_error"] = str(exc).splitlines()[0][:200]
    return row


def gemm_rs_row(name, g, warmup, reps, world, group_name):
    """GEMM + ReduceScatter: A[S x I/W] times B[I/W x H], reduce-scattered over S; tensors freed on return."""
    S, H, I = MLP[name]  # noqa: E741 - TileLink's names: tokens, hidden, intermediate
    a = torch.randn(S, I // world, device="cuda", dtype=torch.bfloat16, generator=g)
    b2 = torch.randn(I // world, H, device="cuda", dtype=torch.bfloat16, generator=g)
    c = torch.empty(S, H, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(S // world, H, device="cuda", dtype=torch.bfloat16)
    row = {"shape": name, "op": "GEMM+RS", "S": S, "H": H, "I": I}
    row["gemm_ms"] = timed(lambda: torch.matmul(a, b2, out=c), warmup, reps)
    row["collective_ms"] = timed(lambda: dist.reduce_scatter_tensor(out, c), warmup, reps)

    def gemm_then_rs():
        torch.matmul(a, b2, out=c)
        dist.reduce_scatter_tensor(out, c)

    row["not_overlapped_ms"] = timed(gemm_then_rs, warmup, reps)
    try:
        op = torch.ops.symm_mem.fused_matmul_reduce_scatter
        row["async_tp_ms"] = timed(lambda: op(a, b2, "sum", 0, group_name), warmup, reps)
    except Exception as exc:  # noqa: BLE001
        row["async_tp_error"] = str(exc).splitlines()[0][:200]
    return row


def mlp_suite(names, warmup, reps, world, group_name):
    rows = []
    import torch.distributed._symmetric_memory as symm_mem  # registers the symm_mem ops

    try:
        symm_mem.enable_symm_mem_for_group(group_name)
    except Exception as exc:  # noqa: BLE001
        log(f"enable_symm_mem_for_group failed: {exc}")
    for name in names:
        g = torch.Generator(device="cuda").manual_seed(1234 + dist.get_rank())
        for half in (ag_gemm_row, gemm_rs_row):
            rows.append(half(name, g, warmup, reps, world, group_name))
            log(json.dumps(rows[-1]))
        torch.cuda.empty_cache()
    return rows


def calibration(warmup, reps, world):
    """Copy-engine peer copies vs size, stream-written signal cost, GEMM time vs rows."""
    import torch.distributed._symmetric_memory as symm_mem
    from torch._C._distributed_c10d import _SymmetricMemory

    rank = dist.get_rank()
    peer = (rank + 1) % world
    cal = {"copy_engine": [], "gemm_rows": []}
    max_bytes = 256 << 20
    buf = symm_mem.empty(max_bytes // 2, dtype=torch.bfloat16, device="cuda")
    hdl = symm_mem.rendezvous(buf, dist.group.WORLD)
    sig = symm_mem.empty(64, dtype=torch.uint32, device="cuda").zero_()
    sig_hdl = symm_mem.rendezvous(sig, dist.group.WORLD)
    local = torch.randn(max_bytes // 2, device="cuda").to(torch.bfloat16)
    for shift in range(16, 29, 2):  # 64 KiB .. 256 MiB
        nbytes = 1 << shift
        remote = hdl.get_buffer(peer, [nbytes // 2], torch.bfloat16, 0)
        ms = timed(lambda remote=remote, n=nbytes // 2: remote.copy_(local[:n]), warmup, reps)
        cal["copy_engine"].append({"bytes": nbytes, "ms": ms, "GBps": nbytes / ms / 1e6})
        log(json.dumps(cal["copy_engine"][-1]))
    # Signal cost: many stream writes of a peer's flag in a row, per write.
    remote_sig = sig_hdl.get_buffer(peer, [64], torch.uint32, 0)
    count = 1000

    def signals():
        for i in range(count):
            _SymmetricMemory.stream_write_value32(remote_sig, i % 64, i + 1)

    try:
        cal["stream_write_value32_us"] = timed(signals, 2, 5) * 1000 / count
    except Exception as exc:  # noqa: BLE001
        cal["stream_write_value32_error"] = str(exc).splitlines()[0][:200]
    log(json.dumps({k: v for k, v in cal.items() if not isinstance(v, list)}))
    # GEMM time against the number of rows (chunked GEMMs of MLP-1's AG+GEMM).
    H, I = 4096, 11008 // world  # noqa: E741 - TileLink's names: hidden, intermediate per rank
    b = torch.randn(H, I, device="cuda", dtype=torch.bfloat16)
    for rows in (256, 512, 1024, 2048, 4096, 8192):
        a = torch.randn(rows, H, device="cuda", dtype=torch.bfloat16)
        ms = timed(lambda a=a: a @ b, warmup, reps)
        cal["gemm_rows"].append({"M": rows, "N": I, "K": H, "ms": ms, "TFLOPs": 2 * rows * H * I / ms / 1e9})
        log(json.dumps(cal["gemm_rows"][-1]))
    return cal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(MLP), help="comma-separated MLP shape names")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--skip-calibration", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    names = [s for s in args.shapes.split(",") if s]
    unknown = [s for s in names if s not in MLP]
    if unknown:
        raise SystemExit(f"unknown shapes {unknown}; choose from {list(MLP)}")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    world = dist.get_world_size()
    group_name = dist.group.WORLD.group_name
    t0 = time.time()
    report = {
        "schema": "ovl.bench-baselines/v1",
        "device": torch.cuda.get_device_name(),
        "world": world,
        "torch": torch.__version__,
        "dtype": "bf16",
        "warmup": args.warmup,
        "reps": args.reps,
        "timing": "CUDA events, median per rank, max over ranks",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    report["mlp"] = mlp_suite(names, args.warmup, args.reps, world, group_name)
    if not args.skip_calibration:
        report["calibration"] = calibration(args.warmup, args.reps, world)
    report["wall_s"] = round(time.time() - t0, 1)
    if dist.get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
        print(f"{'shape':7} {'op':8} {'gemm':>7} {'coll':>7} {'seq':>7} {'asyncTP':>8} {'seq/bound':>9}")
        for r in report["mlp"]:
            bound = max(r["gemm_ms"], r["collective_ms"])
            atp = r.get("async_tp_ms")
            print(
                f"{r['shape']:7} {r['op']:8} {r['gemm_ms']:7.3f} {r['collective_ms']:7.3f} "
                f"{r['not_overlapped_ms']:7.3f} {atp if atp is None else round(atp, 3)!s:>8} "
                f"{r['not_overlapped_ms'] / bound:9.2f}"
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
