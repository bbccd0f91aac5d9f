"""NVSHMEM bootstrapped by the runner through nvshmem4py (``_runner.nvshmem_select`` / ``nvshmem_uid`` / ``nvshmem_direct``
/ ``nvshmem_peers`` / ``nvshmem_launch``) on the CPU, without nvshmem4py: when a process goes direct rather than through
PyTorch's symmetric memory, the unique id's trip through a store, the error when nvshmem4py is missing, what a direct
session refuses, its allocator, and the launcher's module initialisation. The GPU check is
tests_gpu/test_nvshmem_mpg_gpu.py (two processes on one GPU)."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import time
import types
from datetime import timedelta
from typing import Any

import builders
import numpy as np
import pytest

from ovl_runtime import parse_manifest
from ovl_runtime._runner import env as runner_env
from ovl_runtime._runner import nvshmem_launch
from ovl_runtime._runner.nvshmem_select import Placement, heap_from_env, nvshmem_heap, placement, visible_gpus
from ovl_runtime._runner.nvshmem_uid import load_uid, share_uid, uid_bytes
from ovl_runtime.errors import DeviceError, ManifestError, UsageError

# ---- selection ----


@pytest.mark.parametrize(
    ("needs", "local_world", "gpus", "requested", "want"),
    [
        (True, 2, 1, None, "direct"),  # two processes on one GPU
        (True, 4, 1, "auto", "direct"),
        (True, 8, 4, "", "direct"),
        (True, 2, 2, None, "torch"),  # one GPU per process
        (True, 1, 1, None, "torch"),
        (True, 2, None, None, "torch"),  # GPUs unknown: nothing says they are shared
        (True, 2, 0, None, "torch"),
        (True, 2, 2, "direct", "direct"),  # forced
        (True, 2, 2, " Direct ", "direct"),
        (True, 2, 2, "torch", "torch"),
        (False, 2, 1, None, None),  # no manifest puts through NVSHMEM
        (False, 2, 1, "direct", None),
    ],
)
def test_which_nvshmem_a_process_uses(needs, local_world, gpus, requested, want):
    assert nvshmem_heap(needs, Placement(local_world, gpus), requested) == want


def test_torch_nvshmem_on_a_shared_gpu_is_refused_citing_the_probe():
    with pytest.raises(UsageError, match=r"OVL_NVSHMEM=torch, but 3 processes share 2 GPUs.*team API.*nvshmem-mpg-h200-2026-12-02"):
        nvshmem_heap(True, Placement(3, 2), "torch")


@pytest.mark.parametrize("needs", [True, False])
def test_an_unknown_choice_is_refused_even_without_nvshmem_manifests(needs):
    with pytest.raises(UsageError, match=r"OVL_NVSHMEM='nvshmem4py': use one of auto, direct, torch"):
        heap_from_env(needs, {"OVL_NVSHMEM": "nvshmem4py", "LOCAL_WORLD_SIZE": "2"}, gpus=1)


@pytest.mark.parametrize(("listed", "count"), [("0", 1), ("0,1", 2), ("GPU-1a2b,GPU-3c4d,", 2), ("", 0), ("1,-1,0", 1), (" 3 , 2 ", 2)])
def test_visible_gpus_follow_cuda_visible_devices(listed, count):
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": listed}) == count


def test_placement_gives_gloo_and_wraps_local_ranks_only_when_processes_share_a_gpu():
    shared = placement({"LOCAL_WORLD_SIZE": "4", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert shared == Placement(4, 2) and shared.shared and shared.process_group_backend == "gloo"
    assert [shared.device(r) for r in range(4)] == [0, 1, 0, 1]
    own = placement({"LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert not own.shared and own.process_group_backend == "nccl" and [own.device(r) for r in range(2)] == [0, 1]
    assert placement({}, gpus=8) == Placement(1, 8)
    with pytest.raises(UsageError, match="LOCAL_WORLD_SIZE='two'"):
        placement({"LOCAL_WORLD_SIZE": "two"}, gpus=1)


def _nvshmem_manifest(name: str = "nv") -> Any:
    return types.SimpleNamespace(name=name, world=2, requires_nvshmem=True, host_ops=[], kernels=[])


def test_process_backends_leave_pytorchs_symmetric_memory_on_cuda_when_ovl_bootstraps_nvshmem(monkeypatch):
    plain = parse_manifest(builders.ag_gemm(world=2))
    shared = {"LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0"}
    own = {"LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert runner_env.process_backends([_nvshmem_manifest()], env=shared) == ("cuda", "direct")
    assert runner_env.process_backends([_nvshmem_manifest()], env=own) == ("nvshmem", "torch")
    assert runner_env.process_backends([_nvshmem_manifest()], env={**own, "OVL_NVSHMEM": "direct"}) == ("cuda", "direct")
    assert runner_env.process_backends([plain], env=shared) == ("cuda", None)
    with pytest.raises(UsageError, match="drop --symm-backend cuda"):
        runner_env.process_backends([_nvshmem_manifest()], "cuda", env=shared)


# ---- the unique id through a store ----


class FakeStore:
    """``torch.distributed.Store``'s set / get / wait over a dict; ``wait`` gives up past its timeout."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.waited: list[tuple[list[str], timedelta]] = []

    def set(self, key: str, value: bytes) -> None:
        assert isinstance(value, bytes)
        self.data[key] = value

    def get(self, key: str) -> bytes:
        return self.data[key]

    def wait(self, keys: list[str], timeout: timedelta) -> None:
        self.waited.append((keys, timeout))
        deadline = time.monotonic() + timeout.total_seconds()
        while not all(k in self.data for k in keys):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Wait timeout after {timeout.total_seconds() * 1000:g}ms, keys: {keys}")
            time.sleep(0.001)


class FakeUid:
    """nvshmem4py's ``UniqueID`` as the exchange sees it: ``_data`` (a numpy view of the struct) and ``ptr``."""

    def __init__(self, size: int = 128, fill: bytes | None = None) -> None:
        self.buf = (ctypes.c_uint8 * size)()
        if fill is not None:
            ctypes.memmove(self.buf, fill, size)
        self._data = np.ctypeslib.as_array(self.buf)
        self.ptr = ctypes.addressof(self.buf)


def test_the_unique_id_reaches_every_rank_byte_for_byte():
    store = FakeStore()
    made = FakeUid(fill=bytes(np.random.default_rng(3).integers(0, 256, 128, dtype=np.uint8)))
    got0 = share_uid(store, 0, lambda: made, FakeUid, timeout_s=5)
    assert got0 is made and store.data["ovl/nvshmem/uid"] == uid_bytes(made)
    got1 = share_uid(store, 1, lambda: pytest.fail("only rank 0 makes the id"), FakeUid, timeout_s=5)
    got2 = share_uid(store, 2, lambda: pytest.fail("only rank 0 makes the id"), FakeUid, timeout_s=5)
    assert uid_bytes(got1) == uid_bytes(got2) == uid_bytes(made) and got1 is not made
    assert store.waited == [(["ovl/nvshmem/uid"], timedelta(seconds=5))] * 2


def test_a_missing_unique_id_is_a_bounded_named_error():
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match=r"rank 1 got no unique id from rank 0 within 0.2 s \(store key 'ovl/nvshmem/uid'\)"):
        share_uid(FakeStore(), 1, lambda: None, FakeUid, timeout_s=0.2)
    assert time.monotonic() - t0 < 2


def test_a_unique_id_of_another_size_is_refused_not_truncated():
    with pytest.raises(DeviceError, match="has 64 bytes, this process's has 128"):
        load_uid(FakeUid(128), bytes(64))


# ---- nvshmem4py, lazily ----


def test_nvshmem4py_is_imported_only_when_needed_and_its_absence_says_what_to_install(monkeypatch):
    from ovl_runtime._runner import nvshmem_direct

    code = "import sys, ovl_runtime._runner.nvshmem_direct, ovl_runtime._runner.torchrun; print('nvshmem' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.split() == ["False"]
    monkeypatch.setitem(sys.modules, "nvshmem", None)  # as if not installed (an import of it raises ImportError)
    monkeypatch.setitem(sys.modules, "nvshmem.core", None)
    with pytest.raises(UsageError, match=r"needs nvshmem4py.*pip install 'ovl-runtime\[nvshmem\]' \(nvshmem4py-cu13"):
        nvshmem_direct.import_nvshmem4py()
    with pytest.raises(UsageError, match="needs nvshmem4py"):
        nvshmem_direct.DirectNvshmem.start(0, 2, 0, FakeStore(), 1.0)


def test_the_device_library_is_looked_for_where_nvshmem_lib_dir_says(tmp_path, monkeypatch):
    from ovl_runtime._runner.nvshmem_direct import device_bitcode

    (tmp_path / "libnvshmem_device.bc").write_bytes(b"BC")
    monkeypatch.setenv("NVSHMEM_LIB_DIR", str(tmp_path))
    nv = types.SimpleNamespace(find_device_bitcode_library=lambda: pytest.fail("NVSHMEM_LIB_DIR comes first"))
    assert device_bitcode(nv) == str(tmp_path / "libnvshmem_device.bc")
    monkeypatch.setenv("NVSHMEM_LIB_DIR", str(tmp_path / "none"))
    monkeypatch.setitem(sys.modules, "nvidia.nvshmem", None)

    def finder() -> str:
        raise RuntimeError("no include directory")

    with pytest.raises(UsageError, match=r"libnvshmem_device.bc was not found.*none/libnvshmem_device.bc.*no include directory"):
        device_bitcode(types.SimpleNamespace(find_device_bitcode_library=finder))


# ---- a direct session: refusals, allocator, launcher ----


def test_a_direct_session_refuses_manifests_that_need_peer_views():
    from ovl_runtime._runner.nvshmem_peers import check_direct_session

    ce = parse_manifest(builders.ag_gemm(world=2))  # host copies between peers' buffers
    with pytest.raises(UsageError, match=rf"manifest {ce.name} cannot run on NVSHMEM bootstrapped through nvshmem4py: .*copy-engine"):
        check_direct_session(ce, group_is_world=True)
    sm = parse_manifest(builders.gemm_rs_sm(world=2))  # peer-pointer tables
    with pytest.raises(UsageError, match=r"reads peer pointers.*the SM backend.*no peer views"):
        check_direct_session(sm, group_is_world=True)
    check_direct_session(_nvshmem_manifest("nv"), group_is_world=True)  # PEs by number: runs
    with pytest.raises(UsageError, match="nv puts through NVSHMEM, whose PEs are the global ranks: run it on the world group"):
        check_direct_session(_nvshmem_manifest("nv"), group_is_world=False)


class FakeHeap:
    """A ``DirectNvshmem`` that allocates CPU tensors and records allocation and free order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def tensor(self, shape: tuple[int, ...], dtype: Any) -> Any:
        import torch

        self.log.append(f"alloc {shape}")
        return torch.zeros(shape, dtype=dtype)

    def free(self, t: Any) -> None:
        self.log.append(f"free {tuple(t.shape)}")


def test_direct_peers_allocate_symmetric_buffers_on_the_heap_in_order_and_give_no_peer_views():
    import torch

    from ovl_runtime._runner.nvshmem_peers import DirectPeers

    m = parse_manifest(builders.ag_gemm(world=2))
    heap = FakeHeap()
    peers = DirectPeers(heap, rank=1)
    symmetric = [b for b in m.buffers if b.symmetric]
    assert len(symmetric) >= 2
    for b in symmetric:
        peers.allocate(b, torch.float32)
    assert heap.log == [f"alloc {tuple(b.shape)}" for b in symmetric]
    first = symmetric[0].name
    assert peers.flat(first, 1).shape == (int(np.prod(symmetric[0].shape)),)
    with pytest.raises(ManifestError, match=rf"rank 1 addresses {first!r} on rank 0: a direct NVSHMEM session has no peer views"):
        peers.flat(first, 0)
    with pytest.raises(ManifestError, match="peer pointers"):
        peers.pointers(first)
    peers.free()
    assert heap.log[len(symmetric) :] == [f"free {tuple(b.shape)}" for b in symmetric] and peers.tensors == {}


class FakeJit:
    """A ``JITFunction`` as the launcher sees it: ``run`` and the per-device kernel caches."""

    def __init__(self) -> None:
        self.device_caches: dict[int, tuple[dict[Any, Any], ...]] = {0: ({"old": types.SimpleNamespace(module=11)},)}
        self.runs: list[dict[str, Any]] = []

    def run(self, *args: Any, **kwargs: Any) -> str:
        self.runs.append(kwargs)
        return "launched"


class InitLog:
    extern_libs = {"libnvshmem_device": "/lib/libnvshmem_device.bc"}

    def __init__(self) -> None:
        self.modules: list[int] = []

    def init_module(self, kernel: Any) -> None:
        self.modules.append(kernel.module)


def test_the_launcher_links_nvshmem_and_initialises_each_module_before_its_launch(monkeypatch):
    import triton

    previous: list[str] = []
    monkeypatch.setattr(triton.knobs.runtime, "jit_post_compile_hook", lambda **kw: previous.append(kw["key"]))
    monkeypatch.setattr(nvshmem_launch, "_installed", [False])
    monkeypatch.setattr(nvshmem_launch, "_registered", {})
    jit, heap = FakeJit(), InitLog()
    kernel = nvshmem_launch.DirectKernel(jit, heap, "push")
    assert heap.modules == [11]  # compiled before the wrapping: initialised when wrapped
    assert kernel[(16,)](x=1, num_warps=4) == "launched"
    assert jit.runs == [{"grid": (16,), "warmup": False, "extern_libs": heap.extern_libs, "x": 1, "num_warps": 4}]
    hook = triton.knobs.runtime.jit_post_compile_hook
    jit.device_caches[0][0]["new"] = types.SimpleNamespace(module=22)
    hook(key="new", fn=types.SimpleNamespace(jit_function=jit), compile={"device": 0})
    other = FakeJit()
    hook(key="elsewhere", fn=types.SimpleNamespace(jit_function=other), compile={"device": 0})
    assert heap.modules == [11, 22] and previous == ["new", "elsewhere"]  # the hook before ours still runs
    with pytest.raises(RuntimeError, match="kernel cache has no entry"):
        hook(key="missing", fn=types.SimpleNamespace(jit_function=jit), compile={"device": 0})


# ---- DirectNvshmem over a stand-in nvshmem4py ----


class FakeNv:
    """The parts of ``nvshmem.core`` the runner calls, recording them; ``pe`` is what ``my_pe`` answers."""

    def __init__(self, bitcode: str, pe: int | None = None) -> None:
        self.bitcode, self.pe = bitcode, pe
        self.calls: list[Any] = []
        self.NvshmemKernelObject = types.SimpleNamespace(from_handle=lambda h: ("kernel-object", h))

    def get_unique_id(self, empty: bool = False) -> FakeUid:
        return FakeUid() if empty else FakeUid(fill=bytes(range(128)))

    def init(self, **kw: Any) -> None:
        self.calls.append(("init", kw["rank"], kw["nranks"], kw["initializer_method"], uid_bytes(kw["uid"]) == bytes(range(128))))
        self.rank, self.world = kw["rank"], kw["nranks"]

    def my_pe(self) -> int:
        return self.rank if self.pe is None else self.pe

    def n_pes(self) -> int:
        return self.world

    def find_device_bitcode_library(self) -> str:
        return self.bitcode

    def module_init(self, obj: Any) -> None:
        self.calls.append(("module_init", obj))

    def finalize(self) -> None:
        self.calls.append("finalize")


def _install_fake_nvshmem4py(monkeypatch: pytest.MonkeyPatch, nv: FakeNv) -> list[int]:
    devices: list[int] = []

    class Device:
        def __init__(self, index: int) -> None:
            self.index = index

        def set_current(self) -> None:
            devices.append(self.index)

    monkeypatch.setitem(sys.modules, "nvshmem", types.ModuleType("nvshmem"))
    monkeypatch.setitem(sys.modules, "nvshmem.core", nv)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.core", types.SimpleNamespace(Device=Device))  # type: ignore[arg-type]
    monkeypatch.delenv("NVSHMEM_LIB_DIR", raising=False)
    return devices


def test_direct_nvshmem_bootstraps_every_rank_over_the_store_and_finalizes_only_with_its_peers(tmp_path, monkeypatch):
    from ovl_runtime._runner.nvshmem_direct import DirectNvshmem

    bc = tmp_path / "libnvshmem_device.bc"
    bc.write_bytes(b"BC")
    store = FakeStore()
    for rank in (0, 1):  # rank 0 first: it publishes the id the other rank waits for
        nv = FakeNv(str(bc))
        devices = _install_fake_nvshmem4py(monkeypatch, nv)
        heap = DirectNvshmem.start(rank, 2, 0, store, timeout_s=5)
        assert devices == [0] and nv.calls == [("init", rank, 2, "uid", True)]
        assert heap.extern_libs == {"libnvshmem_device": str(bc)}
        kernel = types.SimpleNamespace(module=77, _init_handles=lambda: None)
        heap.init_module(kernel)
        heap.init_module(kernel)  # once per module
        assert nv.calls[1:] == [("module_init", ("kernel-object", 77))]
        heap.finalize(peers_alive=rank == 0)
        heap.finalize(peers_alive=True)  # once
        assert nv.calls[2:] == (["finalize"] if rank == 0 else [])


def test_direct_nvshmem_refuses_a_pe_that_is_not_this_rank(tmp_path, monkeypatch):
    from ovl_runtime._runner.nvshmem_direct import DirectNvshmem

    bc = tmp_path / "libnvshmem_device.bc"
    bc.write_bytes(b"BC")
    _install_fake_nvshmem4py(monkeypatch, FakeNv(str(bc), pe=1))
    with pytest.raises(DeviceError, match="NVSHMEM init gave PE 1 of 2, but this process is rank 0 of 2"):
        DirectNvshmem.start(0, 2, 0, FakeStore(), timeout_s=5)
