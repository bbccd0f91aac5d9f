"""The MLP's first half, AllGather + gate/up GEMM + SiLU-mul (`ag-gemm-silu`), compiled by
@ovl/tlx-emitter's compile() from the built-in `gemm_silu_mul` body, in both CPU engines: the
numpy engine models the body's arithmetic under the manifest's tile program, the interpreter
runs the emitted source. W is [K, 2N] laid out as [gate | up]; the reference is
silu(X_all @ W_gate) * (X_all @ W_up) on every rank, from fresh random inputs per epoch."""

from __future__ import annotations

import builders
import numpy as np
import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime.emulate_local import silu_mul
from ovl_runtime.interpret import interpret_unavailable

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherSwizzle, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const plan = planSignals(allGatherSwizzle({ tensor: { name: "X", shape: [c.M, c.K], dtype: c.dtype }, axis: 0, mesh: [c.world], split: c.split, side: "push" }));
  const r = await ovl.compile({
    name: c.name, kind: "ag-gemm-silu", plan, body: ovl.gemmSiluMulBody(),
    problem: { M: c.M, N: c.N, K: c.K }, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] }, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    # name, world, M, N (intermediate), K (hidden), split, tile, dtype
    ("w2_bf16", 2, 128, 64, 64, 1, (32, 32, 32), "bf16"),
    # 3 ranks of 64 rows in 2 chunks each under 32-row tiles; two k-steps, two n-tiles.
    ("w3_split2", 3, 192, 64, 64, 2, (32, 32, 32), "bf16"),
    ("w4_fp32", 4, 128, 32, 64, 1, (32, 32, 32), "fp32"),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return builders.compile_cases(tmp_path_factory, "mlp", SCRIPT, ["name", "world", "M", "N", "K", "split", "tile", "dtype"], CASES)


def test_silu_mul_is_gate_times_sigmoid_gate_times_up():
    rng = np.random.default_rng()
    g, u = rng.standard_normal((2, 5, 7))
    assert np.allclose(silu_mul(g, u), g * (1.0 / (1.0 + np.exp(-g))) * u)
    assert silu_mul(np.zeros(3), np.ones(3)).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_the_manifest_reads_w_as_gate_then_up(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    ref = m.reference
    assert ref.operator == "ag-gemm-silu"
    assert m.buffer(ref.inputs["B"]).shape == (ref.K, 2 * ref.N)
    assert m.buffer(ref.output).shape == (ref.M, ref.N)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_ag_gemm_silu_is_correct_in_the_numpy_engine(compiled, case):
    out = emulate(
        load_manifest(compiled / case / "manifest.json"), epochs=2, seed=int(np.random.default_rng().integers(1 << 30)), engine="numpy"
    )
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", ["w2_bf16", "w3_split2"])
def test_ag_gemm_silu_is_correct_running_its_own_source(compiled, case):
    out = emulate(
        load_manifest(compiled / case / "manifest.json"), epochs=1, seed=int(np.random.default_rng().integers(1 << 30)), engine="interpret"
    )
    out.raise_for_failure()
    assert out.checks and all(c.ok for c in out.checks)
