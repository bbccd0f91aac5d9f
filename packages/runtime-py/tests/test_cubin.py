"""The pure parts of the precompiled-kernel launcher: metadata, grid, scratch, argument packing."""

import copy
import ctypes

import pytest

from ovl_runtime._cubin.driver import ArgPacker, CubinKernel, CUlaunchAttribute, CUlaunchConfig, launch_config, pack_args, persistent_grid
from ovl_runtime._cubin.metadata import CubinError, cap_clusters, launch_grid, parse_metadata, scalar_value, scratch_bytes

# The metadata fbtriton 3.7.4 gave the TLX AG+GEMM push example (scripts/tlx-aot-compile.py), trimmed of its hash.
META = {
    "$schema": "ovl.cubin-metadata/v1",
    "entry": "tlx_ag_gemm_push",
    "target": "sm_90a",
    "shared": 131284,
    "num_warps": 16,
    "threads_per_block": 512,
    "num_ctas": 1,
    "cluster_dims": [1, 1, 1],
    "args": [
        {"name": "a_ptr", "pack": "ptr", "type": "*bf16", "value": {"kind": "buffer", "name": "A"}},
        {"name": "M", "pack": "i32", "type": "i32", "value": {"kind": "int", "value": 1024}},
        {"name": "rank", "pack": "i32", "type": "i32", "value": {"kind": "rank"}},
        {"name": "target", "pack": "i32", "type": "i32", "value": {"kind": "epoch-target", "arrivals": 4}},
        {"name": "timeout_ns", "pack": "i64", "type": "i64", "value": {"kind": "timeout-ns"}},
        {"name": "dst_ptrs", "pack": "ptr", "type": "*i64", "value": {"kind": "peer-pointers", "buffer": "A"}},
    ],
    "hidden_args": [
        {"name": "global_scratch", "pack": "ptr", "bytes_per_program": 384, "align": 128},
        {"name": "profile_scratch", "pack": "ptr", "bytes_per_program": 0, "align": 1},
    ],
}


def read_back(packed):
    """What each void* of the parameter array points to, read as the packed type."""
    out = []
    for p, v in zip(packed.params, packed.values):
        out.append(ctypes.cast(p, ctypes.POINTER(type(v))).contents.value)
    return out


def test_parse_metadata_reads_the_aot_output():
    m = parse_metadata(META)
    assert m.entry == "tlx_ag_gemm_push" and m.shared == 131284 and m.threads_per_block == 512
    assert [a.pack for a in m.args] == ["ptr", "i32", "i32", "i32", "i64", "ptr"]
    assert [h.name for h in m.hidden_args] == ["global_scratch", "profile_scratch"]
    assert m.cluster_dims == (1, 1, 1)


@pytest.mark.parametrize(
    "path,bad",
    [
        ("$schema", "ovl.cubin-metadata/v0"),
        ("entry", "not a name"),
        ("cluster_dims", [1, 0, 1]),
        ("cluster_dims", [True, 1, 1]),
        ("cluster_dims", [2, 1]),
        ("threads_per_block", 384),
        ("shared", -1),
        ("args", [{"name": "x", "pack": "f32"}]),
        ("args", [{"name": "global_scratch", "pack": "ptr"}]),
    ],
)
def test_parse_metadata_names_the_bad_field(path, bad):
    obj = copy.deepcopy(META)
    obj[path] = bad
    with pytest.raises(CubinError) as e:
        parse_metadata(obj)
    assert path.lstrip("$") in e.value.path or path == "args"


def test_pack_args_in_order_with_scratch_pointers():
    m = parse_metadata(META)
    values = {
        "a_ptr": 0x7F0000001000,
        "M": 1024,
        "rank": 1,
        "target": scalar_value(m.args[3], 1, 2, 3, 5),
        "timeout_ns": 5_000_000_000,
        "dst_ptrs": 0x7F0000002000,
        "global_scratch": 0x7F0000003000,
    }
    packed = pack_args(m, values)
    assert len(packed) == 8
    assert read_back(packed) == [0x7F0000001000, 1024, 1, 12, 5_000_000_000, 0x7F0000002000, 0x7F0000003000, 0]
    assert [ctypes.sizeof(v) for v in packed.values] == [8, 4, 4, 4, 8, 8, 8, 8]


def test_pack_args_wraps_unsigned_i32_and_refuses_bad_values():
    m = parse_metadata(META)
    base = {"a_ptr": 1, "M": 1, "rank": 0, "target": 0, "timeout_ns": 1, "dst_ptrs": 2, "global_scratch": 3}
    # An epoch target past 2^31 is the same 32-bit pattern the wrap-aware wait compares.
    assert read_back(pack_args(m, {**base, "target": (1 << 32) - 1}))[3] == -1
    for bad in [{"M": 1 << 32}, {"a_ptr": -1}, {"timeout_ns": 1.5}, {"rank": True}, {"nope": 1}]:
        with pytest.raises(CubinError):
            pack_args(m, {**base, **bad})
    missing = dict(base)
    del missing["M"]
    with pytest.raises(CubinError, match="needs a value for M"):
        pack_args(m, missing)
    # The global scratch holds the device-side TMA descriptors: it may not be null.
    no_scratch = dict(base)
    del no_scratch["global_scratch"]
    with pytest.raises(CubinError, match="global_scratch"):
        pack_args(m, no_scratch)


def test_arg_packer_rewrites_changed_values_in_place_and_checks_them():
    m = parse_metadata(META)
    base = {"a_ptr": 1, "M": 1024, "rank": 0, "target": 4, "timeout_ns": 9, "dst_ptrs": 2, "global_scratch": 3}
    packer = ArgPacker(m)
    first = packer.pack(base)
    assert read_back(first) == read_back(pack_args(m, base))
    # The next epoch: the same array, only the changed slot rewritten (as pack_args packs it, i32 wrapping).
    second = packer.pack({**base, "target": (1 << 32) - 4})
    assert second is first
    assert read_back(second) == read_back(pack_args(m, {**base, "target": (1 << 32) - 4}))
    assert read_back(second)[3] == -4
    # A bad value is refused and leaves the array as it was.
    for bad in [{"M": 1 << 32}, {"rank": True}, {"timeout_ns": 1.5}]:
        with pytest.raises(CubinError):
            packer.pack({**base, **bad})
        assert read_back(packer.pack(base)) == read_back(pack_args(m, base))
    # Another set of names packs anew (and is checked as pack_args checks it).
    with pytest.raises(CubinError, match="has no parameter nope"):
        packer.pack({**base, "nope": 1})
    fresh = packer.pack({k: v for k, v in base.items() if k != "global_scratch"} | {"global_scratch": 7})
    assert read_back(fresh)[6] == 7


def test_scalar_values_follow_monotone_epochs():
    m = parse_metadata(META)
    by = {a.name: a for a in m.args}
    assert [scalar_value(by["target"], 0, 2, k, 9) for k in (1, 2, 3)] == [4, 8, 12]
    assert scalar_value(by["rank"], 1, 2, 1, 9) == 1
    assert scalar_value(by["timeout_ns"], 1, 2, 1, 9) == 9
    assert scalar_value(by["M"], 1, 2, 1, 9) == 1024
    assert scalar_value(by["a_ptr"], 1, 2, 1, 9) is None


def test_grid_scratch_and_cluster():
    m = parse_metadata(META)
    assert launch_grid([{"kind": "num-sms", "cap": 64}], 132) == (64, 1, 1)
    assert launch_grid([{"kind": "num-sms", "cap": 4096}], 132) == (132, 1, 1)
    assert launch_grid([{"kind": "num-sms"}], 132, cluster=(2, 1, 1)) == (132, 1, 1)
    assert launch_grid([{"kind": "num-sms"}], 131, cluster=(2, 1, 1)) == (130, 1, 1)
    assert launch_grid([{"kind": "num-sms", "reserve": 8}], 132) == (124, 1, 1)
    assert launch_grid([{"kind": "num-sms", "reserve": 8, "cap": 100}], 132) == (100, 1, 1)
    assert launch_grid([{"kind": "num-sms", "reserve": 500}], 132) == (1, 1, 1)
    assert launch_grid([3, 2], 132) == (3, 2, 1)
    with pytest.raises(CubinError):
        launch_grid([0], 132)
    with pytest.raises(CubinError):
        launch_grid([1], 132, cluster=(2, 1, 1))
    assert scratch_bytes(m, (132, 1, 1)) == {"global_scratch": 384 * 132, "profile_scratch": 0}


def test_persistent_cluster_grid_is_cut_to_the_clusters_the_gpu_holds():
    assert cap_clusters((132, 1, 1), (2, 1, 1), 66) == (132, 1, 1)
    # A GPC of an odd number of SMs: 65 pairs fit at once, not 66.
    assert cap_clusters((132, 1, 1), (2, 1, 1), 65) == (130, 1, 1)
    assert cap_clusters((16, 1, 1), (2, 1, 1), 65) == (16, 1, 1)
    with pytest.raises(CubinError, match="no cluster"):
        cap_clusters((132, 1, 1), (2, 1, 1), 0)
    with pytest.raises(CubinError, match="one-dimensional"):
        cap_clusters((132, 2, 1), (2, 1, 1), 66)


def test_a_kernels_persistent_grid_is_cut_to_its_clusters_only_when_it_has_clusters():
    class Held(CubinKernel):
        def max_active_clusters(self) -> int:  # what cuOccupancyMaxActiveClusters would answer
            return 65

    plain = Held(None, None, None, parse_metadata(META))
    paired = Held(None, None, None, parse_metadata({**META, "cluster_dims": [2, 1, 1]}))
    assert persistent_grid(plain, [{"kind": "num-sms"}], 132) == (132, 1, 1)
    assert persistent_grid(paired, [{"kind": "num-sms"}], 132) == (130, 1, 1)
    assert persistent_grid(paired, [{"kind": "num-sms"}], 33) == (32, 1, 1)


def test_launch_config_layout_matches_cuda_h():
    # cuda.h (64-bit): CUlaunchAttribute is 72 bytes, CUlaunchConfig 56.
    assert ctypes.sizeof(CUlaunchAttribute) == 72
    assert ctypes.sizeof(CUlaunchConfig) == 56
    m = parse_metadata(META)
    cfg, _ = launch_config(m, (132, 1, 1), 0)
    assert (cfg.gridDimX, cfg.blockDimX, cfg.sharedMemBytes, cfg.numAttrs) == (132, 512, 131284, 0)
    clustered = parse_metadata({**META, "cluster_dims": [2, 1, 1]})
    cfg, attrs = launch_config(clustered, (132, 1, 1), 0)
    assert cfg.numAttrs == 1 and attrs[0].id == 4 and list(attrs[0].value[:3]) == [2, 1, 1]
    with pytest.raises(CubinError):
        launch_config(clustered, (131, 1, 1), 0)
