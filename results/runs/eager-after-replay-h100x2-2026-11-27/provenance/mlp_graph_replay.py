"""Diagnostic: why the torch API's MLP layer replayed from a CUDA graph can be slower than the same layer eager.

Under torchrun, per MLP shape of ``--shapes`` at this world, rank 0 reports:

- ``ovl.all_gather_matmul_silu_mul`` (the layer's copy-engine AllGather + gate/up GEMM) and the whole layer
  (``tp_mlp``), each eager and replayed from a CUDA graph (``--capture torch``: the runner's capture path, the
  copies and signals as torch copies; ``--capture driver``: the copies captured through ``cuMemcpyAsync``, the
  signals still torch copies of the epoch word);
- one eager call and one replay of the AllGather + GEMM under torch's profiler: every device activity (kernel,
  memcpy, memset) with its start relative to the first, its duration and its stream, so one sees what a replay
  runs the copies as and when the GEMM's chunks land.

    OVL_KERNELS=out-kern-mlp OVL_TARGET=h100 torchrun --nproc_per_node=2 packages/bench/gpu/diag/mlp_graph_replay.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch
import torch.distributed as dist
from ovl_runtime import gpu_rank
from ovl_runtime.mlp import all_gather_matmul_silu_mul, tp_mlp

HERE = Path(__file__).resolve().parent


def _baselines():
    spec = importlib.util.spec_from_file_location("ovl_baselines", HERE.parent / "baselines.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BASELINES = _baselines()


def driver_capture(original):
    """``RankState.enqueue_host_ops`` whose copies go through the driver while capturing too (the signals stay
    torch copies of the epoch word, so each replay signals its own epoch)."""

    def enqueue(self, ops, stream, warm, waits):
        if self.driver is None or not torch.cuda.is_current_stream_capturing():
            return original(self, ops, stream, warm, waits)
        handle = stream.cuda_stream
        with torch.cuda.stream(stream):
            for op in ops:
                if op[0] == "copy":
                    _, dst, src, sig = op
                    self.driver.copy(handle, dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size())
                    if sig is not None:
                        sig.copy_(self.epoch_word, non_blocking=True)
                else:
                    _, slot, arrivals, on = op
                    waits.enqueue(stream, slot, 0 if warm else self.target(arrivals), on)

    return enqueue


def timeline(fn, label: str, rank: int) -> list[dict]:
    """One call of ``fn`` under the profiler: its device activities, start-ordered."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    dist.barrier()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        rows.append(
            {
                "name": e.name[:70],
                "start": e.time_range.start,
                "us": e.time_range.end - e.time_range.start,
                "stream": getattr(e, "device_resource_id", -1),
            }
        )
    rows.sort(key=lambda r: r["start"])
    t0 = rows[0]["start"] if rows else 0
    for r in rows:
        r["start"] -= t0
    if rank == 0:
        print(f"-- {label}: {len(rows)} device activities")
        for r in rows[:60]:
            print(f"   {r['start']:9.1f} us  {r['us']:9.1f} us  stream {r['stream']:>4}  {r['name']}")
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="MLP-1,MLP-5")
    p.add_argument("--capture", choices=("torch", "driver"), default="torch")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--profile", choices=("none", "eager", "both"), default="both", help="which AllGather + GEMM calls to profile")
    a = p.parse_args()
    if a.capture == "driver":
        gpu_rank.RankState.enqueue_host_ops = driver_capture(gpu_rank.RankState.enqueue_host_ops)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    group = dist.group.WORLD
    report = {"world": world, "capture": a.capture, "device": torch.cuda.get_device_name(), "rows": []}
    for name in a.shapes.split(","):
        tokens, hidden, inter = BASELINES.MLP[name]
        i = inter // world
        x = (torch.randn(tokens // world, hidden, device="cuda") / 4).to(torch.bfloat16)
        w = (torch.randn(hidden, 2 * i, device="cuda") / 32).to(torch.bfloat16)
        down = (torch.randn(i, hidden, device="cuda") / 32).to(torch.bfloat16)

        def ag(x=x, w=w):
            return all_gather_matmul_silu_mul(x, w, group)

        def layer(x=x, w=w, down=down):
            return tp_mlp(x, w, down, group)

        row = {"shape": name}
        for label, fn in (("ag-gemm-silu", ag), ("layer", layer)):
            row[f"{label} eager"] = BASELINES.timed(fn, 3, a.reps)
            replay = BASELINES.graphed(fn)
            row[f"{label} graph"] = BASELINES.timed(replay, 3, a.reps)
            if label == "ag-gemm-silu" and a.profile != "none":
                row["eager timeline"] = timeline(fn, f"{name} {label} eager", rank)
                if a.profile == "both":
                    row["graph timeline"] = timeline(replay, f"{name} {label} graph ({a.capture} capture)", rank)
            del replay
        report["rows"].append(row)
        if rank == 0:
            print(json.dumps({k: v for k, v in row.items() if "timeline" not in k}), flush=True)
    if rank == 0:
        print(f"| shape (world {world}, {a.capture} capture) | ag-gemm-silu eager | graph | layer eager | graph |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for r in report["rows"]:
            print(
                f"| {r['shape']} | {r['ag-gemm-silu eager']:.3f} | {r['ag-gemm-silu graph']:.3f} | {r['layer eager']:.3f} | {r['layer graph']:.3f} |"
            )
        if a.out:
            Path(a.out).write_text(json.dumps(report, indent=1))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
