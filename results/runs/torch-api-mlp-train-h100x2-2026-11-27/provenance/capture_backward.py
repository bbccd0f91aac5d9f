"""Diagnostic: which backward pass a CUDA graph can capture, under torchrun at MLP-1's per-rank shapes.

Each case (``--case``: only that one) runs eagerly twice, then is captured on a side stream (``capture_error_mode`` from ``--mode``) and
replayed; prints ok or the first line of the error. Cases: torch autograd through NCCL collectives
(``Gather``/``Scatter`` autograd functions), and ``torch.autograd.grad`` of each ovl operator of the MLP layer:
``all_gather_matmul``, ``matmul_reduce_scatter``, ``all_gather_matmul_silu_mul``, ``tp_mlp``.

    OVL_KERNELS=out-kern-mlptrain OVL_TARGET=h100 torchrun --nproc_per_node=4 packages/bench/gpu/diag/capture_backward.py

Its eager calls run on the legacy default stream before the side-stream warm-up and capture; the ovl cases fail
so (results/gpu/torch-api-mlp-train-h100x2-2026-11-27/capture/), the pattern of autograd nodes made on the legacy
stream before a capture (pytorch/pytorch#164302). With every call and the capture on one side stream
(``torch_api_tp_multigpu.py --op mlp-train``) the whole training step captures.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import torch
import torch.distributed as dist
from ovl_runtime import ops
from ovl_runtime.mlp import all_gather_matmul_silu_mul, tp_mlp

spec = importlib.util.spec_from_file_location("tp_bench", Path(__file__).resolve().parents[1] / "torch_api_tp_multigpu.py")
tp_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tp_bench)


def _trace_calls() -> None:
    """``--trace``: print the thread, current stream and capture status at each ovl launch and NCCL gather inside
    a backward, and the full traceback of an error raised there (the autograd engine reports only its own)."""
    import threading
    import traceback

    from ovl_runtime import autograd, bound

    def wrap(owner, name):
        inner = getattr(owner, name)

        def traced(*args, **kwargs):
            s = torch.cuda.current_stream()
            print(
                f"rank {dist.get_rank()} {name}: thread {threading.current_thread().name}, stream {s.cuda_stream:#x}, "
                f"capturing {torch.cuda.is_current_stream_capturing()}",
                flush=True,
            )
            try:
                return inner(*args, **kwargs)
            except Exception:
                traceback.print_exc()
                raise

        setattr(owner, name, traced)

    wrap(bound.BoundOperator, "run")
    wrap(autograd, "gather_rows")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="global", choices=("global", "thread_local", "relaxed"))
    p.add_argument("--case", help="run only this case (a failed capture can leave the process unusable)")
    p.add_argument("--trace", action="store_true", help="print each launch's thread, stream and capture status")
    p.add_argument("--inter", type=int, default=11008, help="MLP intermediate size of all ranks (MLP-1's by default)")
    a = p.parse_args()
    if a.trace:
        _trace_calls()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    group = dist.group.WORLD
    S, H, inter = 8192, 4096, a.inter
    I = inter // world
    g = torch.Generator(device="cuda").manual_seed(1)

    def leaf(*shape):
        return (torch.randn(*shape, device="cuda", generator=g) / 16).to(torch.bfloat16).requires_grad_(True)

    x, w, down, wrs = leaf(S // world, H), leaf(H, 2 * I), leaf(I, H), leaf(I, H)
    h = leaf(S, I)
    cot_ag = torch.randn(S, 2 * I, device="cuda", generator=g).to(torch.bfloat16)
    cot_silu = torch.randn(S, I, device="cuda", generator=g).to(torch.bfloat16)
    cot_rows = torch.randn(S // world, H, device="cuda", generator=g).to(torch.bfloat16)

    def torch_nccl():
        gu = tp_bench._Gather.apply(x) @ w
        y = tp_bench._Scatter.apply((torch.nn.functional.silu(gu[:, :I]) * gu[:, I:]) @ down)
        return torch.autograd.grad(y, (x, w, down), cot_rows)

    cases = {
        "torch autograd + NCCL": torch_nccl,
        "all_gather_matmul": lambda: torch.autograd.grad(ops.all_gather_matmul(x, w, group), (x, w), cot_ag),
        "matmul_reduce_scatter": lambda: torch.autograd.grad(ops.matmul_reduce_scatter(h, wrs, group), (h, wrs), cot_rows),
        "all_gather_matmul_silu_mul": lambda: torch.autograd.grad(all_gather_matmul_silu_mul(x, w, group), (x, w), cot_silu),
        "tp_mlp": lambda: torch.autograd.grad(tp_mlp(x, w, down, group), (x, w, down), cot_rows),
        "tp_mlp forward only": lambda: tp_mlp(x, w, down, group),
    }
    for name, fn in cases.items():
        if a.case and name != a.case:
            continue
        try:
            for _ in range(2):
                fn()
            torch.cuda.synchronize()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.stream(side):
                fn()  # a warm-up on the side stream, as torch's docs ask before capturing a backward
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            with torch.cuda.stream(side), torch.cuda.graph(graph, stream=side, capture_error_mode=a.mode):
                fn()
            torch.cuda.current_stream().wait_stream(side)
            graph.replay()
            torch.cuda.synchronize()
            result = "ok"
        except Exception as exc:  # noqa: BLE001 - the point is to report it
            result = f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0]}"
            torch.cuda.synchronize()
        dist.barrier()
        if rank == 0:
            print(f"| {name} | {a.mode} | {result} |", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
