"""fp16 through the torch API's own compile path, without a GPU: each operator the kernel library compiles, keyed in
fp16 (``KernelKey(..., "fp16")``), built by ovl's CLI with the key's arguments (``--dtype fp16``), found and checked
against its key, then run in CPU emulation (the numpy engine, or the interpreter for attention, which the numpy engine
does not model) and checked against its reference at fp16's tolerance."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._kernels import library as lib

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
pytestmark = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")

#: fp16's default tolerance (the compiler's ``DEFAULT_TOLERANCE.fp16``).
FP16_TOLERANCE = 5e-3

#: One small key of each operator the torch API runs (GEMM AG / RS / AR / A2A, MoE parts 1 and 2, attention, MLP's first
#: stage), in fp16. Keys whose tile a tuned table decides take the compiler's default table (no ``OVL_TARGET``).
KEYS = [
    lib.KernelKey("ag-gemm", 2, 256, 128, 64, "fp16", target=""),
    lib.KernelKey("gemm-rs", 2, 512, 128, 64, "fp16", target=""),
    lib.KernelKey("gemm-ar", 2, 512, 128, 64, "fp16", target=""),
    lib.KernelKey("a2a-gemm", 2, 256, 128, 64, "fp16", target=""),
    lib.KernelKey("ag-moe", 2, 64, 64, 32, "fp16", experts=4, topk=2, target=""),
    lib.KernelKey("moe-rs", 2, 64, 32, 32, "fp16", experts=4, topk=2),
    lib.KernelKey("ag-attention", 2, 128, 4 * 32, 2 * 2 * 32, "fp16", heads=4, causal=True),
    lib.KernelKey("ag-gemm-silu", 2, 256, 64, 64, "fp16"),
]


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """Every key compiled into one library directory, as ``python -m ovl_runtime kernels ... --dtype fp16`` would."""
    root = tmp_path_factory.mktemp("fp16-library")
    mp = pytest.MonkeyPatch()
    mp.setenv("OVL_CLI", f"node {CLI}")
    try:
        for key in KEYS:
            lib.ensure_compiled(key, root)
    finally:
        mp.undo()
    return root


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.op)
def test_an_fp16_key_compiles_to_an_fp16_manifest_that_emulates_correctly(library, key):
    assert key.dirname.endswith("-fp16")
    path = library / key.dirname / "manifest.json"
    m = load_manifest(path)
    lib.check_manifest(m, key, path)  # the operator, sizes and dtype the key names
    ref = m.reference
    assert m.dtype == "fp16" and ref.tolerance == FP16_TOLERANCE
    named = {m.buffer(b).dtype for k, b in [*ref.inputs.items(), ("output", ref.output)] if k not in ("topk", "weights")}
    assert named == {"fp16"}
    engine = "interpret" if key.op == "ag-attention" else "numpy"
    if engine == "interpret" and interpret_unavailable() is not None:
        pytest.skip(str(interpret_unavailable()))
    out = emulate(m, epochs=1, seed=7, engine=engine)
    out.raise_for_failure()
    assert out.checks and all(c.ok and c.tolerance == FP16_TOLERANCE for c in out.checks)
