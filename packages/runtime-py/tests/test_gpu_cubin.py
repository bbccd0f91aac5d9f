"""The GPU session's glue for precompiled kernels, run on the CPU against a recording stand-in
for torch and the driver: which addresses, scratch sizes, grid and epochs reach ``launch``.

Only the driver calls themselves (module load, occupancy query, ``cuLaunchKernelEx``) are
left out; they need a GPU.
"""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import replace
from itertools import count
from pathlib import Path

import pytest

from ovl_runtime._cubin.launch import CoResidencyError
from ovl_runtime._manifest.parse import load_manifest

FIXTURE = Path(__file__).parent / "fixtures" / "tlx_push_w2" / "manifest.json"
_addr = count(0x7F00_0000_0000, 0x10000)


class FakeTensor:
    def __init__(self, size: int = 0) -> None:
        self.size = size
        self._ptr = next(_addr)

    def data_ptr(self) -> int:
        return self._ptr


def _fake_torch() -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.uint8 = "uint8"  # type: ignore[attr-defined]
    torch.zeros = lambda size, dtype, device: FakeTensor(size)  # type: ignore[attr-defined]
    stream = types.SimpleNamespace(cuda_stream=0xABC)
    torch.cuda = types.SimpleNamespace(current_stream=lambda: stream)  # type: ignore[attr-defined]
    return torch


class FakeKernel:
    def __init__(self, meta) -> None:
        self.meta = meta
        self.launches: list[tuple] = []

    def launch(self, grid, values, stream=0):
        self.launches.append((grid, dict(values), stream))


@pytest.fixture()
def gpu_cubin(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", _fake_torch())
    monkeypatch.delitem(sys.modules, "ovl_runtime._runner.precompiled", raising=False)
    mod = importlib.import_module("ovl_runtime._runner.precompiled")
    monkeypatch.setattr(mod, "driver", lambda: object())
    monkeypatch.setattr(mod.CubinKernel, "load", classmethod(lambda cls, d, data, meta: FakeKernel(meta)))
    monkeypatch.setattr(mod, "max_active_blocks", lambda k: 1)
    yield mod
    sys.modules.pop("ovl_runtime._runner.precompiled", None)


def _session(num_sms: int, rank: int = 1):
    m = load_manifest(FIXTURE)
    return types.SimpleNamespace(
        m=m,
        rank=rank,
        world=m.world,
        num_sms=num_sms,
        epoch=0,
        tensors={b.name: FakeTensor() for b in m.buffers},
        sig_kernel=FakeTensor(),
        tables={t.name: FakeTensor() for t in m.tables},
        peer_ptrs={b.name: FakeTensor() for b in m.buffers if b.symmetric},
        err=FakeTensor(),
        epoch_word=FakeTensor(),
        zero_word=FakeTensor(),
    )


def test_launch_gets_session_addresses_scratch_and_counted_epochs(gpu_cubin):
    s = _session(num_sms=132)
    launch = gpu_cubin.CubinLaunch(s, s.m.kernels[0], 0)
    assert launch.grid == (32, 1, 1)  # num-sms capped at the 32 tiles
    assert launch.scratch["global_scratch"].size == 384 * 32 and "profile_scratch" not in launch.scratch
    for epoch, warm in [(1, True), (2, False)]:
        s.epoch = epoch
        launch.launch(warm)
    k: FakeKernel = launch.kernel
    (grid0, v0, stream0), (_g1, v1, _s1) = k.launches
    assert grid0 == (32, 1, 1) and stream0 == 0xABC
    assert v0["a_ptr"] == s.tensors["A"].data_ptr() and v0["sig_ptr"] == s.sig_kernel.data_ptr()
    assert v0["dst_ptrs"] == s.peer_ptrs["A"].data_ptr() and v0["sig_ptrs"] == s.peer_ptrs["signals"].data_ptr()
    assert v0["push_ptr"] == s.tables["push_rows"].data_ptr() and v0["err_ptr"] == s.err.data_ptr()
    assert v0["global_scratch"] == launch.scratch["global_scratch"].data_ptr()
    assert (v0["ovl_rank"], v0["target"], v1["target"]) == (1, 4, 8)  # the warm-up counts as epoch 1


def test_a_push_grid_beyond_the_sms_is_refused_before_launch(gpu_cubin):
    s = _session(num_sms=16)
    k = s.m.kernels[0]
    # A num-sms grid shrinks to the SMs (each CTA then takes more push rows and tiles)...
    assert gpu_cubin.CubinLaunch(s, k, 0).grid == (16, 1, 1)
    # ...a fixed grid of more CTAs than SMs cannot be resident at once: refused.
    with pytest.raises(CoResidencyError, match="32 CTAs"):
        gpu_cubin.CubinLaunch(s, replace(k, grid=(32,)), 0)
