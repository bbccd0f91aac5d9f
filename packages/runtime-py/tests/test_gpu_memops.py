"""``ovl_runtime.gpu_memops``: the host ops' copies and signal writes through the driver, checked — against
a stand-in for libcuda that records the calls (no GPU here)."""

from __future__ import annotations

import ctypes

import pytest

from ovl_runtime._runner.memops import DriverOps


class FakeLib:
    """cuMemcpyAsync / cuStreamWriteValue32_v2 that record their arguments and return ``rc``."""

    def __init__(self, rc: int = 0) -> None:
        self.calls: list[tuple] = []
        self.rc = rc

        def copy(dst, src, n, stream):
            self.calls.append(("copy", dst, src, n, stream.value))
            return self.rc

        def write(stream, addr, value, flags):
            self.calls.append(("write", stream.value, addr, value, flags))
            return self.rc

        self.cuMemcpyAsync = copy
        self.cuStreamWriteValue32_v2 = write


def test_copies_and_signals_reach_the_driver_in_order_with_the_epoch_as_uint32():
    lib = FakeLib()
    ops = DriverOps(lib)
    ops.copy(0x10, 0x2000, 0x1000, 4096)
    ops.write(0x10, 0x3004, 7)
    ops.write(0x10, 0x3004, -1)  # an epoch past 2^31 wraps: the slot holds its low 32 bits
    assert lib.calls == [
        ("copy", 0x2000, 0x1000, 4096, 0x10),
        ("write", 0x10, 0x3004, 7, 0),  # flags 0: the driver's memory barrier before the write
        ("write", 0x10, 0x3004, 0xFFFFFFFF, 0),
    ]


def test_a_failing_driver_call_raises_with_its_result_code():
    ops = DriverOps(FakeLib(rc=700))
    with pytest.raises(RuntimeError, match=r"cuMemcpyAsync of 16 bytes 0x1 -> 0x2 failed with CUresult 700"):
        ops.copy(0, 0x2, 0x1, 16)
    with pytest.raises(RuntimeError, match=r"cuStreamWriteValue32 to 0x8 failed with CUresult 700"):
        ops.write(0, 0x8, 1)


def test_the_torch_path_is_chosen_by_the_environment_or_without_libcuda(monkeypatch):
    monkeypatch.setenv("OVL_HOST_COPIES", "torch")
    assert DriverOps.load() is None
    monkeypatch.setenv("OVL_HOST_COPIES", "driver")

    def no_lib(_name):
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    assert DriverOps.load() is None
    monkeypatch.setattr(ctypes, "CDLL", lambda _name: FakeLib())
    assert isinstance(DriverOps.load(), DriverOps)


class FakeStream:
    cuda_stream = 0x10


def test_after_a_capture_signals_copy_the_device_epoch_word_instead_of_a_host_literal(monkeypatch):
    """A replay advances the device's epoch word, not the host's count: once a launch was captured, the host
    ops stay on the torch path (a signal copies the word), or an eager call after replays would signal an epoch
    its peers' kernels have left behind."""
    import contextlib

    import torch

    from ovl_runtime._runner.rank import RankState

    lib = FakeLib()
    state = RankState.__new__(RankState)  # only what enqueue_host_ops reads
    state.driver, state.epoch = DriverOps(lib), 3
    state.epoch_word = torch.tensor([3], dtype=torch.int32)
    src, dst, sig = torch.arange(8, dtype=torch.int32), torch.zeros(8, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    ops = [("copy", dst, src, sig)]
    capturing = [False]
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing[0])
    monkeypatch.setattr(torch.cuda, "stream", lambda _s: contextlib.nullcontext())

    state.enqueue_host_ops(ops, FakeStream(), False, None)  # eager, never captured: the driver, the host's epoch
    assert [c[0] for c in lib.calls] == ["copy", "write"] and lib.calls[1][3] == 3 and not dst.any()

    capturing[0] = True
    state.enqueue_host_ops(ops, FakeStream(), False, None)  # captured: torch copies, the device's word
    assert len(lib.calls) == 2 and torch.equal(dst, src) and int(sig) == 3

    capturing[0] = False
    state.epoch, state.epoch_word[0] = 4, 9  # five replays later the word is 9; the host counted one launch
    dst.zero_()
    state.enqueue_host_ops(ops, FakeStream(), False, None)
    assert len(lib.calls) == 2, "an eager call after a capture went to the driver with a stale literal epoch"
    assert torch.equal(dst, src) and int(sig) == 9
