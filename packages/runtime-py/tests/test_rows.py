"""One compiled AllGather+GEMM for every row count of a range (``ovl emit ag-gemm --any-rows``): the manifest is
made concrete at each M (``load_manifest(rows=M)``, ``_manifest.rows.instantiate``) and the same emitted kernel runs
correctly in both CPU engines at row counts that are not powers of two; M outside the range is refused by name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime.errors import UsageError

CLI = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
needs_cli = pytest.mark.skipif(shutil.which("node") is None or not CLI.is_file(), reason="needs node and the built ovl CLI")


@pytest.fixture(scope="module")
def any_rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ag-any")
    # 32-row m-blocks, two chunks per rank: each rank needs at least 65 rows; served 130..512 at world 2.
    cmd = ["node", str(CLI), "emit", "ag-gemm", "--n", "64", "--k", "64", "--m", "256", "--world", "2", "--tile", "32x64x32"]
    cmd += ["--any-rows", "--max-rows", "512", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "manifest.json"


@needs_cli
def test_the_manifest_serves_a_range_and_says_when_not_to_overlap(any_rows):
    m = load_manifest(any_rows, symbolic=True)
    assert m.rows is not None and (m.rows.min, m.rows.max, m.rows.multiple, m.rows.at) == (130, 512, 2, 256)
    # Where the simulator finds a row count below which overlapping loses, the manifest names it and why.
    assert (m.rows.fallback_below is None) == (m.rows.fallback_reason is None)
    assert m.rows.fallback_reason is None or "simulated on" in m.rows.fallback_reason
    assert any(a.kind == "rows" for _n, a in m.kernels[0].args)
    concrete = load_manifest(any_rows)
    assert concrete.rows is None and concrete.reference.M == 256 and concrete.buffer("A").shape == (256, 64)


@needs_cli
@pytest.mark.parametrize("M", [130, 250, 512])
def test_one_kernel_is_correct_at_row_counts_it_was_not_compiled_at(any_rows, M):
    m = load_manifest(any_rows, rows=M)
    assert m.reference.M == M and m.buffer("A").shape == (M, 64) and m.buffer("gemm_c").shape == (M, 64)
    assert dict(m.kernels[0].args)["M"].value == M
    out = emulate(m, epochs=2, seed=M, engine="numpy")
    assert out.ok and out.failures == [] and len(out.checks) == 2
    if interpret_unavailable() is None:
        out = emulate(m, epochs=1, seed=M + 1, engine="interpret")
        assert out.ok and out.failures == [], out.failures


@needs_cli
@pytest.mark.parametrize(("M", "why"), [(131, "multiples of 2"), (128, "130..512"), (514, "130..512")])
def test_a_row_count_outside_the_range_is_refused_by_name(any_rows, M, why):
    with pytest.raises(UsageError, match=why):
        load_manifest(any_rows, rows=M)
