"""The torch API and the TLX kernels without a GPU: which key a call takes (a prepared ``<dirname>-tlx`` directory
where the tuned table measured TLX faster, ``OVL_TLX``), that prepared cubins reading the epoch on the device are
bound while ones taking a host epoch are refused, and the epoch word a cubin launch packs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ovl_runtime._cubin.launch import DeviceAddresses, LaunchScalars, cubin_values, launch_epoch
from ovl_runtime._cubin.metadata import load_metadata
from ovl_runtime._kernels import library as lib
from ovl_runtime._kernels import tlx, tlx_record
from ovl_runtime._manifest.parse import load_manifest, parse_manifest
from ovl_runtime.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures"
#: The emitter's small TLX AllGather+GEMM (world 2), AOT-compiled: its producer reads the rank's epoch word.
DEVICE_EPOCH = FIXTURES / "tlx_ag_gemm_w2"
#: An older push example compiled for a host-side epoch target.
HOST_EPOCH = FIXTURES / "tlx_push_w2"


def _bound():
    pytest.importorskip("torch")
    from ovl_runtime._runner import bound

    return bound


def test_a_tlx_manifest_reading_the_epoch_on_the_device_is_bound():
    bound = _bound()
    m = load_manifest(DEVICE_EPOCH / "manifest.json")
    assert any(k.precompiled is not None for k in m.kernels)
    assert [n for k in m.kernels for n, a in k.args if a.kind == "epoch-word"] == ["epoch_ptr"]
    assert bound.refusal(m) is None
    assert bound.capture_refusal(m) is None  # copies and stream-written signals only: a graph captures them
    assert bound.backend_of(m) == "tlx"


def test_a_cubin_taking_a_host_epoch_is_refused_with_how_to_fix_it():
    bound = _bound()
    why = bound.refusal(load_manifest(HOST_EPOCH / "manifest.json"))
    assert why is not None and "take the epoch from the host" in why and "re-emit it" in why


def test_the_cubin_launch_packs_the_epoch_word_and_a_zero_word_for_the_warm_up():
    m = load_manifest(DEVICE_EPOCH / "manifest.json")
    k = m.kernels[0]
    meta = load_metadata(DEVICE_EPOCH / "tlx_ag_gemm.sm_90a.json")
    addr = DeviceAddresses(
        buffers={b.name: 0x10000 * (i + 1) for i, b in enumerate(m.buffers)},
        tables={t.name: 0x900000 for t in m.tables},
        error=0xE00000,
        epoch=0xF00000,
    )
    scalars = LaunchScalars(rank=1, world=2, epoch=3, bits=32, timeout_ns=5)
    scratch = {h.name: 0xA00000 for h in meta.hidden_args if h.bytes_per_program > 0}
    values = cubin_values(meta, k, addr, scalars, scratch)
    assert values["epoch_ptr"] == 0xF00000
    assert "target" not in values and "epoch" not in values
    # A warm-up launch of a kernel that sends nothing itself waits for nothing: epoch 0, the zero word.
    assert launch_epoch(k, 3, warm=True) == 0


@pytest.fixture
def library(tmp_path, monkeypatch):
    """A library holding the TLX directory of ag-gemm w2 1024x512x256 (the fixture, renamed to its key)."""
    monkeypatch.setenv("OVL_KERNELS", str(tmp_path))
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OVL_TLX", raising=False)
    monkeypatch.delenv("OVL_TARGET", raising=False)
    key = lib.KernelKey("ag-gemm", 2, 1024, 512, 256, tlx=True)
    shutil.copytree(DEVICE_EPOCH, tmp_path / key.dirname)
    return tmp_path / key.dirname


def _record(d: Path, fastest: str) -> None:
    (d / tlx.RECORD).write_text(json.dumps({"$schema": tlx.RECORD_SCHEMA, "backend": "tlx", "fastest": fastest}))


def test_the_tlx_key_is_named_apart_and_never_compiled_here():
    key = lib.KernelKey("ag-gemm", 2, 1024, 512, 256, tlx=True)
    assert key.dirname == "ag-gemm-w2-m1024-n512-k256-bf16-tlx"
    assert lib.KernelKey("gemm-rs", 2, 1024, 512, 256, tlx=True).dirname.endswith("-sm-w2-m1024-n512-k256-bf16-tlx")
    with pytest.raises(UsageError, match="TLX kernels are compiled"):
        lib.KernelKey("gemm-ar", 2, 1024, 512, 256, tlx=True)
    with pytest.raises(UsageError, match="TLX kernels are compiled"):
        lib.KernelKey("ag-gemm", 2, 1024, 512, 256, rows=2048, tlx=True)


def test_a_call_takes_the_prepared_tlx_directory_where_the_table_measured_it_faster(library):
    _record(library, "tlx")
    key = lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16")
    assert key.tlx and lib.find(key) == library / "manifest.json"
    m = lib.manifest_for(key)
    assert m.reference.operator == "ag-gemm" and any(k.precompiled is not None for k in m.kernels)


def test_where_the_table_picks_triton_the_call_stays_on_triton_unless_forced(library, monkeypatch):
    _record(library, "triton")
    assert not lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16").tlx
    monkeypatch.setenv("OVL_TLX", "1")
    assert lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16").tlx
    (library / tlx.RECORD).unlink()  # no record: only OVL_TLX=1 takes it
    assert lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16").tlx
    monkeypatch.setenv("OVL_TLX", "auto")
    assert not lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16").tlx


def test_ovl_tlx_0_turns_the_tlx_kernels_off(library, monkeypatch):
    _record(library, "tlx")
    monkeypatch.setenv("OVL_TLX", "0")
    key = lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16")
    assert not key.tlx
    monkeypatch.setenv("OVL_TLX", "yes")
    with pytest.raises(UsageError, match="OVL_TLX"):
        lib.call_key("ag-gemm", 2, 1024, 512, 256, "bf16")


def test_other_shapes_dtypes_and_operators_take_the_triton_key(library):
    _record(library, "tlx")
    assert not lib.call_key("ag-gemm", 2, 2048, 512, 256, "bf16").tlx  # no directory for this M
    assert not lib.call_key("ag-gemm", 2, 1024, 512, 256, "fp16").tlx
    assert not lib.call_key("gemm-ar", 2, 1024, 512, 256, "bf16").tlx


def test_a_missing_tlx_directory_says_how_to_prepare_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OVL_KERNELS", str(tmp_path))
    monkeypatch.setenv("OVL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(lib.KernelNotCompiled, match="--tlx"):
        lib.compile_key(lib.KernelKey("ag-gemm", 2, 1024, 512, 256, tlx=True))


def test_a_record_of_another_schema_is_ignored(tmp_path):
    (tmp_path / tlx.RECORD).write_text(json.dumps({"fastest": "tlx"}))
    assert not tlx_record.table_prefers_tlx(tmp_path)
    (tmp_path / tlx.RECORD).write_text("not json")
    assert tlx_record.read_record(tmp_path) == {}


def test_the_fixture_is_the_emitters_device_epoch_form():
    raw = json.loads((DEVICE_EPOCH / "manifest.json").read_text())
    m = parse_manifest(raw)
    assert m.kernels[0].constexprs["WAIT_ARRIVALS"] == 1
