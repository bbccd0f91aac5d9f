"""The launch plan of precompiled kernels without a GPU: manifest ``precompiled``, argument values
packed as the metadata says, the warm-up epoch of push kernels, and the co-residency refusal.

The fixture ``fixtures/tlx_push_w2`` is the emitter's small AG+GEMM push example with the
cubin and metadata fbtriton 3.7.4 wrote for it (``scripts/tlx-aot-compile.py``).
"""

from __future__ import annotations

import ctypes
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from ovl_runtime._cubin.driver import pack_args
from ovl_runtime._cubin.launch import (
    CoResidencyError,
    DeviceAddresses,
    LaunchScalars,
    blocks_per_sm_bound,
    check_co_resident,
    check_metadata,
    cubin_values,
    launch_epoch,
)
from ovl_runtime._cubin.metadata import CubinError, load_metadata, scratch_bytes
from ovl_runtime._manifest.parse import load_manifest, parse_manifest, precompiled_files
from ovl_runtime.errors import ManifestError

FIXTURE = Path(__file__).parent / "fixtures" / "tlx_push_w2"


@pytest.fixture()
def push():
    m = load_manifest(FIXTURE / "manifest.json")
    k = m.kernels[0]
    _cubin, meta_path = precompiled_files(k, 0)
    return m, k, load_metadata(meta_path)


def _addresses(m) -> DeviceAddresses:
    # Distinct fake device addresses per object, so a swapped argument shows.
    base = 0x7F00_0000_0000
    bufs = {b.name: base + 0x1000 * i for i, b in enumerate(m.buffers)}
    tables = {t.name: base + 0x100000 + 0x1000 * i for i, t in enumerate(m.tables)}
    peers = {b.name: base + 0x200000 + 0x1000 * i for i, b in enumerate(m.buffers) if b.symmetric}
    return DeviceAddresses(bufs, tables, peers, error=base + 0x300000)


def _read_back(packed):
    return [ctypes.cast(p, ctypes.POINTER(type(v))).contents.value for p, v in zip(packed.params, packed.values)]


def test_precompiled_is_parsed_and_resolved_against_the_manifest(push):
    m, k, meta = push
    assert k.precompiled is not None
    assert k.precompiled.target == "sm_90a" and k.precompiled.cubin == "tlx_ag_gemm_push.sm_90a.cubin"
    cubin, meta_path = precompiled_files(k, 0)
    assert cubin == (FIXTURE / "tlx_ag_gemm_push.sm_90a.cubin").resolve() and cubin.stat().st_size > 0
    assert meta.entry == k.entry == "tlx_ag_gemm_push"


def test_precompiled_files_must_exist_for_a_gpu_run(tmp_path):
    for f in ("manifest.json", "tlx_ag_gemm_push.py", "tlx_ag_gemm_push.sm_90a.json"):
        shutil.copy(FIXTURE / f, tmp_path / f)
    m = load_manifest(tmp_path / "manifest.json")  # the emulation needs no cubin
    with pytest.raises(ManifestError) as e:
        precompiled_files(m.kernels[0], 0)
    assert e.value.path == "kernels[0].precompiled.cubin" and "tlx-aot-compile" in str(e.value)
    in_memory = parse_manifest(json.loads((FIXTURE / "manifest.json").read_text()))
    with pytest.raises(ManifestError, match="load_manifest"):
        precompiled_files(in_memory.kernels[0], 0)


@pytest.mark.parametrize("bad", [{"target": "sm_80"}, {"cubin": "../x.cubin"}, {"metadata": "x.txt"}, {"cubin": 3}])
def test_bad_precompiled_fields_are_named(bad):
    d = json.loads((FIXTURE / "manifest.json").read_text())
    d["kernels"][0]["precompiled"].update(bad)
    field = next(iter(bad))
    with pytest.raises(ManifestError) as e:
        parse_manifest(d)
    assert e.value.path == f"kernels[0].precompiled.{field}"


def test_values_pack_in_the_metadata_layout(push):
    m, k, meta = push
    addr = _addresses(m)
    grid = (32, 1, 1)
    scratch = {name: 0x7E00_0000_0000 for name, size in scratch_bytes(meta, grid).items() if size}
    assert scratch_bytes(meta, grid)["global_scratch"] == 384 * 32
    scalars = LaunchScalars(rank=1, world=2, epoch=3, bits=32, timeout_ns=m.wait_timeout_ns)
    values = cubin_values(meta, k, addr, scalars, scratch)
    packed = pack_args(meta, values)
    got = _read_back(packed)
    args = dict(k.args)
    expected = []
    for ca in meta.args:
        a = args[ca.name]
        # Each lambda is called at once, with this iteration's `a` bound as a default.
        expected.append(
            {
                "buffer": lambda a=a: addr.buffers[a.name],
                "table": lambda a=a: addr.tables[a.name],
                "peer-pointers": lambda a=a: addr.peers[a.buffer],
                "error-buffer": lambda: addr.error,
                "int": lambda a=a: a.value,
                "rank": lambda: 1,
                "world": lambda: 2,
                "timeout-ns": lambda: m.wait_timeout_ns,
                "epoch-target": lambda a=a: 3 * a.arrivals,
            }[a.kind]()
        )
    expected += [0x7E00_0000_0000, 0]  # global_scratch, then profile_scratch (0 bytes: null)
    assert got == expected
    sizes = {"ptr": 8, "i32": 4, "i64": 8}
    assert [ctypes.sizeof(v) for v in packed.values] == [sizes[a.pack] for a in meta.args] + [8, 8]
    # The push table, its count and the symmetric peers land where the kernel reads them.
    names = [a.name for a in meta.args]
    assert got[names.index("push_ptr")] == addr.tables["push_rows"]
    assert got[names.index("dst_ptrs")] == addr.peers["A"] and got[names.index("sig_ptrs")] == addr.peers["signals"]
    assert got[names.index("num_pushes")] == len(m.table("push_rows").values[1]) // 5


def test_epoch_targets_wrap_as_32_bit_slots(push):
    m, k, meta = push
    scratch = {"global_scratch": 1}
    big = LaunchScalars(rank=0, world=2, epoch=(1 << 30) + 1, bits=32, timeout_ns=1)
    values = cubin_values(meta, k, _addresses(m), big, scratch)
    assert values["target"] == ((((1 << 30) + 1) * 4) % (1 << 32))  # 4, as the counters wrap to
    assert _read_back(pack_args(meta, values))[[a.name for a in meta.args].index("target")] == 4


def test_missing_addresses_and_scratch_are_refused(push):
    m, k, meta = push
    addr = _addresses(m)
    s = LaunchScalars(rank=0, world=2, epoch=1, bits=32, timeout_ns=1)
    with pytest.raises(CubinError, match="global_scratch"):
        cubin_values(meta, k, addr, s, {})
    no_peers = replace(addr, peers={})
    with pytest.raises(CubinError, match="peer-pointers 'A'"):
        cubin_values(meta, k, no_peers, s, {"global_scratch": 1})


def test_stale_metadata_is_refused(push):
    m, k, meta = push
    with pytest.raises(CubinError, match="recompile"):
        check_metadata(replace(meta, entry="other"), k)
    with pytest.raises(CubinError, match="missing"):
        check_metadata(replace(meta, args=meta.args[:-1]), k)
    changed = tuple(replace(a, value={"kind": "int", "value": 9}) if a.name == "num_pushes" else a for a in meta.args)
    with pytest.raises(CubinError, match="num_pushes"):
        check_metadata(replace(meta, args=changed), k)
    check_metadata(meta, k)
    # A cubin compiled for clusters the manifest does not ask for, and the reverse.
    with pytest.raises(CubinError, match=r"clusters \[2, 1, 1\], the manifest asks \[1, 1, 1\]"):
        check_metadata(replace(meta, cluster_dims=(2, 1, 1)), k)
    paired = replace(k, precompiled=replace(k.precompiled, cluster=(2, 1, 1)))
    with pytest.raises(CubinError, match=r"clusters \[1, 1, 1\], the manifest asks \[2, 1, 1\]"):
        check_metadata(meta, paired)
    check_metadata(replace(meta, cluster_dims=(2, 1, 1)), paired)


def test_manifest_cluster_is_three_positive_integers(push):
    raw = json.loads((FIXTURE / "manifest.json").read_text())
    raw["kernels"][0]["precompiled"]["cluster"] = [2, 1, 1]
    assert parse_manifest(raw).kernels[0].precompiled.cluster == (2, 1, 1)
    for bad in ([2, 1], [0, 1, 1], [2, 1, True], "2x1"):
        raw["kernels"][0]["precompiled"]["cluster"] = bad
        with pytest.raises(ManifestError, match="cluster"):
            parse_manifest(raw)


def test_push_kernels_warm_up_with_the_real_epoch(push):
    m, k, _meta = push
    plain = replace(k, template_kind="tlx-ag-gemm")
    assert launch_epoch(k, 1, warm=True) == 1 and launch_epoch(k, 5, warm=False) == 5
    assert launch_epoch(plain, 1, warm=True) == 0 and launch_epoch(plain, 5, warm=False) == 5


def test_warm_up_of_a_push_kernel_targets_what_its_own_launch_sends(push):
    """Epochs 1 (warm-up), 2, 3: the target of each is every arrival sent so far, never 0."""
    m, k, meta = push
    arrivals = dict(k.args)["target"].arrivals
    for epoch, warm in [(1, True), (2, False), (3, False)]:
        s = LaunchScalars(rank=0, world=2, epoch=launch_epoch(k, epoch, warm), bits=32, timeout_ns=1)
        assert cubin_values(meta, k, _addresses(m), s, {"global_scratch": 1})["target"] == epoch * arrivals


def test_push_grid_must_be_co_resident(push):
    m, k, meta = push
    per_sm = blocks_per_sm_bound(meta, shared_per_sm=228 * 1024)
    assert per_sm == 1  # 16 warps under the register cap, and 131 KB of shared memory
    check_co_resident(k, (132, 1, 1), 132, per_sm)
    with pytest.raises(CoResidencyError) as e:
        check_co_resident(k, (133, 1, 1), 132, per_sm)
    assert e.value.code == "not-co-resident" and "num-sms" in str(e.value)
    with pytest.raises(CoResidencyError):
        check_co_resident(k, (32, 1, 1), 16, per_sm)
    # A kernel whose waits are met by the copy engine need not be co-resident.
    check_co_resident(replace(k, template_kind="tlx-ag-gemm"), (4096, 1, 1), 132, 1)


def test_blocks_per_sm_bound_follows_threads_and_shared(push):
    _m, _k, meta = push
    small = replace(meta, num_warps=4, threads_per_block=128, shared=16 * 1024)
    assert blocks_per_sm_bound(small) == 1  # the register cap of 65536 / 128 threads fills the file
    assert blocks_per_sm_bound(replace(meta, shared=200 * 1024), shared_per_sm=228 * 1024) == 1
    assert blocks_per_sm_bound(replace(meta, shared=240 * 1024), shared_per_sm=228 * 1024) == 0


def test_a_misaligned_pointer_the_kernel_assumes_aligned_is_refused(push):
    m, k, meta = push
    assert "src_ptr" in meta.aligned and "M" in meta.aligned and "rank" not in meta.aligned
    addr = _addresses(m)
    s = LaunchScalars(rank=0, world=2, epoch=1, bits=32, timeout_ns=1)
    cubin_values(meta, k, addr, s, {"global_scratch": 0x7E00_0000_0000})  # every address 16-byte aligned
    src = dict(k.args)["src_ptr"].name
    shifted = replace(addr, buffers={**addr.buffers, src: addr.buffers[src] + 8})
    with pytest.raises(CubinError, match=r"assuming (a_ptr|src_ptr) is a multiple of 16"):
        cubin_values(meta, k, shifted, s, {"global_scratch": 0x7E00_0000_0000})


def test_aligned_must_name_parameters(push):
    _m, _k, meta = push
    raw = json.loads((FIXTURE / "tlx_ag_gemm_push.sm_90a.json").read_text())
    raw["aligned"] = ["no_such_arg"]
    from ovl_runtime._cubin.metadata import parse_metadata

    with pytest.raises(CubinError, match="aligned"):
        parse_metadata(raw)
