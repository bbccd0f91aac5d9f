"""Probe: NVSHMEM used directly (nvshmem4py, no torch rendezvous) by two processes on one GPU.

Run as two processes on the same GPU (probe.sh). Each step is tried in order and recorded as
ok / failed (with the exception) in OUT/probe-rank<r>.json; a failed step stops the later steps
that need it. Every wait is bounded (host deadline on a CUDA event); nothing changes a device setting.

Steps:
  init      nvshmem.core.init over a UID (rank 0 writes it to a file, rank 1 reads it)
  alloc     a symmetric float32 tensor and a symmetric uint64 signal word
  peer_ptr  get_peer_tensor (nvshmem_ptr): a torch copy into the peer's tensor
  barrier_all  nvshmem.core.barrier_all on a stream (nvshmem4py documents barrier_all for MPG, team barriers not)
  device_put  a Triton kernel calling ovl's put_signal_add (nvshmemx_putmem_signal_block from NVSHMEM's bitcode),
            module initialised through nvshmem4py; the peer polls its signal word from the host (bounded)
  host_put_signal  host-initiated put_signal on a stream (symmetric source), the peer polls as above
  signal_wait_on_stream  nvshmem's signal_wait on a stream (the first probe saw it end the process: last)
Riskiest last: NVSHMEM ends the process (exit 255) on an API limited MPG does not support, so each step is
marked started before it runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
import traceback

rank, world, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
out = os.environ.get("OUT", work)
result: dict[str, object] = {"rank": rank, "world": world, "steps": {}}
steps: dict[str, object] = result["steps"]  # type: ignore[assignment]


def save() -> None:
    with open(os.path.join(out, f"probe-rank{rank}.json"), "w") as f:
        json.dump(result, f, indent=2)


def step(name):
    def wrap(fn):
        t0 = time.time()
        steps[name] = {"ok": False, "error": "started; the process ended inside this step"}
        save()
        try:
            value = fn()
            steps[name] = {"ok": True, "value": value, "s": round(time.time() - t0, 3)}
            print(f"[rank {rank}] {name}: ok {value}", flush=True)
            save()
            return True
        except BaseException as exc:  # noqa: BLE001 - a probe records every failure
            steps[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
            print(f"[rank {rank}] {name}: FAILED {type(exc).__name__}: {exc}", flush=True)
            save()
            return False

    return wrap


def wait_file(path: str, seconds: float) -> bytes:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path + ".done"):
            with open(path, "rb") as f:
                return f.read()
        time.sleep(0.05)
    raise TimeoutError(f"no {os.path.basename(path)} from the other rank within {seconds} s")


def post_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
    open(path + ".done", "w").close()


def host_barrier(tag: str, seconds: float = 60.0) -> None:
    post_file(os.path.join(work, f"bar-{tag}-{rank}"), b"1")
    for r in range(world):
        wait_file(os.path.join(work, f"bar-{tag}-{r}"), seconds)


def wait_event(ev, seconds: float, what: str) -> None:
    deadline = time.time() + seconds
    while not ev.query():
        if time.time() > deadline:
            raise TimeoutError(f"{what}: not done within {seconds} s (stalled)")
        time.sleep(0.001)


import torch  # noqa: E402

torch.cuda.set_device(0)
result["torch"] = torch.__version__
result["device"] = torch.cuda.get_device_name(0)
import nvshmem  # noqa: E402
import nvshmem.core as nv  # noqa: E402
from cuda.core import Device  # noqa: E402

state: dict[str, object] = {}


@step("init")
def _init():
    uid_path = os.path.join(work, "uid")
    if rank == 0:
        uid = nv.get_unique_id()
        post_file(uid_path, bytes(uid._data.tobytes()))
    else:
        uid = nv.get_unique_id(empty=True)
        raw = wait_file(uid_path, 60)
        ctypes.memmove(uid.ptr, raw, len(raw))
    dev = Device(0)
    dev.set_current()
    state["dev"] = dev
    nv.init(device=dev, uid=uid, rank=rank, nranks=world, initializer_method="uid")
    v = nv.get_version()
    return {"my_pe": nv.my_pe(), "n_pes": nv.n_pes(), "libnvshmem": v.libnvshmem_version, "nvshmem4py": v.nvshmem4py_version}


ok_init = steps.get("init", {}).get("ok", False)  # type: ignore[union-attr]
N = 1 << 16
if ok_init:

    @step("alloc")
    def _alloc():
        t = nv.tensor((N,), dtype=torch.float32)
        sig = nv.tensor((4,), dtype=torch.int64)
        t.fill_(-1.0)
        sig.zero_()
        torch.cuda.synchronize()
        state["t"], state["sig"] = t, sig
        return {"t_ptr": hex(t.data_ptr()), "sig_ptr": hex(sig.data_ptr())}

ok_alloc = steps.get("alloc", {}).get("ok", False)  # type: ignore[union-attr]
peer = (rank + 1) % world


def poll_signal(sig, at_least: int, seconds: float, what: str) -> int:
    """The local signal word, read from the host until it reaches ``at_least`` (bounded; no NVSHMEM call)."""
    deadline = time.time() + seconds
    while True:
        v = int(sig[0].item())
        if v >= at_least:
            return v
        if time.time() > deadline:
            raise TimeoutError(f"{what}: signal {v} < {at_least} after {seconds} s (stalled)")
        time.sleep(0.001)


if ok_alloc:
    host_barrier("alloc")

    @step("peer_ptr")
    def _peer_ptr():
        t = state["t"]
        pt = nv.get_peer_tensor(t, peer)
        pt[: N // 2].fill_(float(100 + rank))
        torch.cuda.synchronize()
        host_barrier("peer_ptr_write")
        got = t[: N // 2]
        return {"peer_ptr": hex(pt.data_ptr()), "ok_elems": int((got == float(100 + peer)).sum().item()), "of": N // 2}

    host_barrier("peer_ptr")

    @step("barrier_all")
    def _barrier():
        s = torch.cuda.Stream()
        nv.barrier_all(stream=s)
        ev = torch.cuda.Event()
        ev.record(s)
        wait_event(ev, 30, "nvshmem barrier_all")
        return "passed"

    host_barrier("barrier")

    @step("device_put")
    def _device_put():
        import triton

        sys.path.insert(0, os.path.join(os.getcwd(), "packages/runtime-py/src"))
        from ovl_runtime.nvshmem import put_signal_add

        @triton.jit(do_not_specialize=["n", "pe"])
        def push(dst, src, sig, n, pe):
            put_signal_add(dst, src, n, sig, pe)

        t, sig = state["t"], state["sig"]
        sig.zero_()
        t.fill_(-1.0)
        torch.cuda.synchronize()
        host_barrier("device_put_ready")
        try:
            lib = nv.find_device_bitcode_library()
        except Exception:  # noqa: BLE001 - no headers in the wheel: the library beside the host one
            import nvidia.nvshmem as nvpkg

            lib = os.path.join(list(nvpkg.__path__)[0], "lib", "libnvshmem_device.bc")
        src = nv.tensor((N,), dtype=torch.float32)
        src.fill_(float(10 * (rank + 1)))
        sig32 = sig.view(torch.int32)
        kernel = push.warmup(t, src, sig32, N, peer, grid=(1,), extern_libs={"libnvshmem_device": str(lib)})
        kernel._init_handles()
        nv.module_init(nv.NvshmemKernelObject.from_handle(kernel.module))
        torch.cuda.synchronize()
        t0 = time.time()
        push[(1,)](t, src, sig32, N, peer, extern_libs={"libnvshmem_device": str(lib)})
        v = poll_signal(sig, 1, 30, "the peer's device put_signal_add")
        torch.cuda.synchronize()
        want = float(10 * (peer + 1))
        return {"bitcode": str(lib), "ok_elems": int((t == want).sum().item()), "of": N, "signal": v, "s": round(time.time() - t0, 4)}

    host_barrier("device_put", 90)

    @step("host_put_signal")
    def _host_put():
        t, sig = state["t"], state["sig"]
        sig.zero_()
        t.fill_(-1.0)
        torch.cuda.synchronize()
        host_barrier("host_put_ready")
        src = nv.tensor((N,), dtype=torch.float32)
        src.fill_(float(rank + 1))
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        sig_buf, _, _ = nv.tensor_get_buffer(sig)
        nv.put_signal(t, src, sig_buf, 1, nv.SignalOp.SIGNAL_SET, remote_pe=peer, stream=s)
        v = poll_signal(sig, 1, 30, "the peer's host put_signal")
        torch.cuda.synchronize()
        return {"received_from": peer, "ok_elems": int((t == float(peer + 1)).sum().item()), "of": N, "signal": v}

    host_barrier("host_put", 60)

    @step("signal_wait_on_stream")
    def _signal_wait():
        sig = state["sig"]
        sig_buf, _, _ = nv.tensor_get_buffer(sig)
        s = torch.cuda.Stream()
        nv.signal_wait(sig_buf, 1, nv.ComparisonType.CMP_GE, stream=s)  # satisfied already (host_put_signal)
        ev = torch.cuda.Event()
        ev.record(s)
        wait_event(ev, 30, "signal_wait on a stream")
        return "passed"

result["done"] = True
save()
try:
    if ok_init:
        nv.finalize()
        result["finalize"] = "ok"
except BaseException as exc:  # noqa: BLE001
    result["finalize"] = f"{type(exc).__name__}: {exc}"
save()
print(f"[rank {rank}] finished", flush=True)
