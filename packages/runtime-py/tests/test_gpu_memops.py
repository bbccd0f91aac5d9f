"""``ovl_runtime.gpu_memops``: the host ops' copies and signal writes through the driver, checked — against
a stand-in for libcuda that records the calls (no GPU here)."""

from __future__ import annotations

import ctypes

import pytest

from ovl_runtime.gpu_memops import DriverOps


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
