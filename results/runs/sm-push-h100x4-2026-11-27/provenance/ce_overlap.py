"""Diagnostic: do a GEMM+ReduceScatter's deliveries overlap the GEMM producer that holds every SM?

Under torchrun, one process per GPU, from a copy-engine GEMM+RS manifest (its producer and its
deliveries' sizes): each copy pattern alone, each compute load alone, and the two started together
(the copies on side streams, no waits between them), as the slowest rank's median. The copy patterns:
the manifest's copies on one stream (``push1``, as the runner issues them) or one stream per
destination (``pushN``); the same bytes pulled by each receiver from its peers' symmetric buffer, on
one stream or one per source (``pull1``, ``pullN``); the same copies within this GPU (``local``); and
``push1`` through ``cuMemcpyBatchAsync`` with the prefer-overlap-with-compute flag (``batch``, where the
driver has it). The compute loads: the manifest's producer on every SM, the producer leaving 16 SMs
free, and cuBLAS on the same GEMM. If ``together`` is about ``max`` of the two alone the copies ran
beside the GEMM; about their sum, they waited for SMs (a copy the driver runs as a kernel).

    torchrun --nproc_per_node=4 packages/bench/gpu/diag/ce_overlap.py out/rs_mlp1_w4_/manifest.json [out.json]
"""

import ctypes
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist
import triton

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "..", "runtime-py", "src"))
from diag_rs import med
from ovl_runtime.gpu import _init_distributed
from ovl_runtime.gpu_session import GpuSession
from ovl_runtime.manifest import load_manifest

FREE_SMS = 16


class _Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _Attrs(ctypes.Structure):
    _fields_ = [("srcAccessOrder", ctypes.c_int), ("srcLocHint", _Loc), ("dstLocHint", _Loc), ("flags", ctypes.c_uint)]


class BatchCopy:
    """``cuMemcpyBatchAsync`` (CUDA 13 signature) with ``CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE``."""

    def __init__(self) -> None:
        lib = ctypes.CDLL("libcuda.so.1")
        get = lib.cuGetProcAddress_v2
        get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p]
        fn = ctypes.c_void_p()
        rc = get(b"cuMemcpyBatchAsync", ctypes.byref(fn), 13000, 0, None)
        if rc != 0 or not fn.value:
            raise RuntimeError(f"cuGetProcAddress(cuMemcpyBatchAsync, 13000) returned {rc}")
        proto = ctypes.CFUNCTYPE(
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_size_t,
            ctypes.POINTER(_Attrs),
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_size_t,
            ctypes.c_void_p,
        )
        self.fn = proto(fn.value)
        self.attrs = _Attrs(1, _Loc(0, 0), _Loc(0, 0), 1)  # stream order, no hints, prefer overlap
        self.zero = ctypes.c_size_t(0)

    def copy(self, stream: int, dst: int, src: int, nbytes: int) -> None:
        d, s, n = ctypes.c_uint64(dst), ctypes.c_uint64(src), ctypes.c_size_t(nbytes)
        rc = self.fn(ctypes.byref(d), ctypes.byref(s), ctypes.byref(n), 1, ctypes.byref(self.attrs), ctypes.byref(self.zero), 1, stream)
        if rc != 0:
            raise RuntimeError(f"cuMemcpyBatchAsync failed with CUresult {rc}")


def together(load, pat, reps: int = 20) -> tuple[float, float, float]:
    """The load and the copies started together (copies on a side stream): when the load ended,
    when the copies ended, and the whole, from the common start (ms; median over reps, slowest rank)."""
    side = torch.cuda.Stream()
    out = []
    for i in range(reps + 3):
        dist.barrier()
        torch.cuda.synchronize()
        main = torch.cuda.current_stream()
        start, load_end, copies_end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record(main)
        side.wait_event(start)
        with torch.cuda.stream(side):
            pat()
            copies_end.record(side)
        load()
        load_end.record(main)
        main.wait_stream(side)
        torch.cuda.synchronize()
        if i >= 3:
            out.append((start.elapsed_time(load_end), start.elapsed_time(copies_end)))
    load_ms = statistics.median(a for a, _ in out)
    copies_ms = statistics.median(b for _, b in out)
    total_ms = statistics.median(max(a, b) for a, b in out)
    t = torch.tensor([load_ms, copies_ms, total_ms], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(float(x) for x in t.tolist())


def main() -> None:
    m = load_manifest(sys.argv[1])
    _init_distributed(m)
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    rank, world = dist.get_rank(), m.world
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    s = GpuSession(m, rank, sms)
    s.launch(warm=True)
    s.sync()
    producer = next(kd for kd in s.kernels if kd["spec"].stream == "compute")
    free = dict(producer, grid=(sms - FREE_SMS,), extra=dict(producer["extra"]))
    for name, a in producer["spec"].args:
        if a.kind == "num-programs":
            free["extra"][name] = sms - FREE_SMS
    if "NUM_SMS" in free["extra"]:
        free["extra"]["NUM_SMS"] = sms - FREE_SMS

    # The manifest's deliveries (dst, src, bytes, destination rank), in its order.
    pushes = []
    for _name, _st, ops in s.host_streams:
        for op in ops:
            if op[0] == "copy":
                dst, src = op[1], op[2]
                owner = next(q for q in range(world) if _inside(dst, s, "partials", q))
                pushes.append((dst.data_ptr(), src.data_ptr(), src.numel() * src.element_size(), owner))
    part = s.tensors["partials"]
    scratch = torch.empty_like(part)
    peer_parts = s.peers.pointers("partials")
    pulls, local = [], []
    for dst, src, n, owner in pushes:
        off = dst - peer_parts[owner]  # where the chunk lands in the owner's partials
        if owner != rank:
            pulls.append((scratch.data_ptr() + off, peer_parts[owner] + off, n, owner))
        local.append((scratch.data_ptr() + off, src, n, rank))

    streams = [torch.cuda.Stream() for _ in range(world)]
    batch = None
    try:
        batch = BatchCopy()
    except (OSError, AttributeError, RuntimeError) as exc:
        if rank == 0:
            print(f"batch copies unavailable: {exc}", flush=True)

    def copies(plan, per_stream: bool, via=None):
        issue = via or s.driver

        def run():
            main = torch.cuda.current_stream()
            ev = torch.cuda.Event()
            ev.record(main)
            used = set()
            for dst, src, n, peer in plan:
                st = streams[peer if per_stream else 0]
                if st not in used:
                    st.wait_event(ev)
                    used.add(st)
                issue.copy(st.cuda_stream, dst, src, n)
            for st in used:
                main.wait_stream(st)

        return run

    a = s.tensors["gemm_a"]
    b = s.tensors["gemm_b"]
    c = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=a.dtype)
    loads = {
        "none": None,
        "producer": lambda: s.launch_kernel(producer, True),
        f"producer, {FREE_SMS} SMs free": lambda: s.launch_kernel(free, True),
        "cublas": lambda: torch.matmul(a, b, out=c),
    }
    patterns = {
        "push1": (pushes, copies(pushes, False)),
        "pushN": (pushes, copies(pushes, True)),
        "pull1": (pulls, copies(pulls, False)),
        "pullN": (pulls, copies(pulls, True)),
        "local": (local, copies(local, False)),
    }
    if batch is not None:
        patterns["batch"] = (pushes, copies(pushes, False, batch))
    rows = []
    alone = {name: med(fn) for name, fn in loads.items() if fn is not None}
    for pname, (plan, pat) in patterns.items():
        nbytes = sum(n for _d, _s, n, _p in plan)
        t_copies = med(pat)
        for lname, load in loads.items():
            load_ms, copies_ms, total_ms = (0.0, t_copies, t_copies) if load is None else together(load, pat)
            rows.append(
                {
                    "copies": pname,
                    "load": lname,
                    "bytes": nbytes,
                    "copiesMs": t_copies,
                    "loadMs": alone.get(lname, 0.0),
                    "togetherMs": total_ms,
                    "loadEndMs": load_ms,
                    "copiesEndMs": copies_ms,
                }
            )
    if rank == 0:
        print(f"{m.name}: {torch.cuda.get_device_name()}, {sms} SMs, world {world}", flush=True)
        print(
            "| copies | compute | GB | copies alone (GB/s) | compute alone | together | compute ended | copies ended | max of the two | sum |",
            flush=True,
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
        for r in rows:
            gbps = r["bytes"] / r["copiesMs"] / 1e6
            print(
                f"| {r['copies']} | {r['load']} | {r['bytes'] / 1e9:.3f} | {r['copiesMs']:.3f} ({gbps:.0f}) | {r['loadMs']:.3f} | "
                f"{r['togetherMs']:.3f} | {r['loadEndMs']:.3f} | {r['copiesEndMs']:.3f} | {max(r['copiesMs'], r['loadMs']):.3f} | "
                f"{r['copiesMs'] + r['loadMs']:.3f} |",
                flush=True,
            )
        if len(sys.argv) > 2:
            with open(sys.argv[2], "w") as fh:
                json.dump({"manifest": m.name, "device": torch.cuda.get_device_name(), "rows": rows}, fh, indent=1)
    dist.destroy_process_group()


def _inside(t: torch.Tensor, s: GpuSession, buffer: str, rank: int) -> bool:
    """Whether tensor ``t`` lies in ``rank``'s copy of symmetric ``buffer`` as this process maps it."""
    base = s.peers.pointers(buffer)[rank]
    size = s.tensors[buffer].numel() * s.tensors[buffer].element_size()
    return base <= t.data_ptr() < base + size


if __name__ == "__main__":
    main()
