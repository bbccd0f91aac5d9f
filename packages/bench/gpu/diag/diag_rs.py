"""Diagnostic: where does an emitted GEMM+RS launch spend its time? Times the whole
launch, the producer GEMM alone, rs-reduce alone (waits pre-satisfied), the host copies
alone, and the launch without rs-reduce, on the manifests given (torchrun, one process per GPU)."""
import os, statistics, sys
import torch, torch.distributed as dist, triton
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "packages", "runtime-py", "src"))
from ovl_runtime.manifest import load_manifest
from ovl_runtime.gpu import _init_distributed
from ovl_runtime.gpu_session import GpuSession


def med(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        dist.barrier(); torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    t = torch.tensor([statistics.median(ts)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


for path in sys.argv[1:]:
    m = load_manifest(path)
    if not dist.is_initialized():
        rank = _init_distributed(m)
        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    rank = dist.get_rank()
    s = GpuSession(m, rank, torch.cuda.get_device_properties(0).multi_processor_count)
    s.launch(warm=True); s.sync()
    full = med(lambda: (s.launch(), s.sync()))
    prod = [kd for kd in s.kernels if kd["spec"].template_kind == "gemm-producer"]
    red = [kd for kd in s.kernels if kd["spec"].template_kind == "rs-reduce"]
    t_prod = med(lambda: s._launch_kernel(prod[0], True)) if prod else float("nan")
    t_red = med(lambda: s._launch_kernel(red[0], True)) if red else float("nan")

    def host_only():
        for _n, st, ops in s.host_streams:
            with torch.cuda.stream(st):
                for op in ops:
                    if op[0] == "copy":
                        op[1].copy_(op[2], non_blocking=True)
        for _n, st, _ops in s.host_streams:
            torch.cuda.current_stream().wait_stream(st)

    t_host = med(host_only)
    # The overlapped launch without the reduction pass: producer + deliveries only.
    every = s.kernels
    s.kernels = [kd for kd in every if kd["spec"].template_kind != "rs-reduce"]
    t_nored = med(lambda: (s.launch(), s.sync()))
    s.kernels = every
    if rank == 0:
        print(f"{m.name}: launch {full:.3f} ms | producer alone {t_prod:.3f} | rs-reduce alone {t_red:.3f} | copies alone {t_host:.3f} | launch without rs-reduce {t_nored:.3f}", flush=True)
    del s
    torch.cuda.empty_cache()
dist.destroy_process_group()
