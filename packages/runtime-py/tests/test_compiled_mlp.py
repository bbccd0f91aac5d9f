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
from ovl_runtime._emulate.chain import emulate_chain, load_chain, mlp_reference
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._emulate.local import silu_mul
from ovl_runtime.errors import ManifestError

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
    ("w2_fp16", 2, 128, 64, 64, 1, (32, 32, 32), "fp16"),
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
@pytest.mark.parametrize("case", ["w2_bf16", "w3_split2", "w2_fp16"])
def test_ag_gemm_silu_is_correct_running_its_own_source(compiled, case):
    out = emulate(
        load_manifest(compiled / case / "manifest.json"), epochs=1, seed=int(np.random.default_rng().integers(1 << 30)), engine="interpret"
    )
    out.raise_for_failure()
    assert out.checks and all(c.ok for c in out.checks)


CHAIN_SCRIPT = """
const ovl = await import(process.argv[1]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const tile = { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] };
  const r = await ovl.compileMlp({
    name: c.name, world: c.world, M: c.M, hidden: c.hidden, intermediate: c.inter, split: c.split,
    upTile: tile, downTile: tile, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  for (const s of r.stages) {
    mkdirSync(join(dir, s.dir), { recursive: true });
    for (const f of s.result.files) writeFileSync(join(dir, s.dir, f.path), f.text);
    writeFileSync(join(dir, s.dir, "manifest.json"), ovl.emitManifestJson(s.result.manifest));
  }
  writeFileSync(join(dir, "chain.json"), JSON.stringify(r.chain, null, 2));
}
"""

CHAIN_CASES = [
    # name, world, M (all tokens), hidden, inter (per rank), split, tile, dtype
    ("mlp_w2", 2, 128, 64, 64, 1, (32, 32, 32), "bf16"),
    ("mlp_w4_split2", 4, 256, 64, 32, 2, (32, 32, 32), "bf16"),
    ("mlp_w2_fp16", 2, 128, 64, 64, 1, (32, 32, 32), "fp16"),
]


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    return builders.compile_cases(
        tmp_path_factory, "mlp_chain", CHAIN_SCRIPT, ["name", "world", "M", "hidden", "inter", "split", "tile", "dtype"], CHAIN_CASES
    )


def test_the_mlp_reference_is_the_dense_mlp_reduce_scattered():
    rng = np.random.default_rng()
    world, rows, hidden, inter = 3, 4, 6, 5
    x = [rng.standard_normal((rows, hidden)) for _ in range(world)]
    wgu = [rng.standard_normal((hidden, 2 * inter)) for _ in range(world)]
    wd = [rng.standard_normal((inter, hidden)) for _ in range(world)]
    # The dense MLP with every rank's columns side by side.
    xa = np.concatenate(x)
    wg = np.concatenate([w[:, :inter] for w in wgu], axis=1)
    wu = np.concatenate([w[:, inter:] for w in wgu], axis=1)
    dense = silu_mul(xa @ wg, xa @ wu) @ np.concatenate(wd)
    got = mlp_reference(x, wgu, wd)
    assert all(np.allclose(got[r], dense[r * rows : (r + 1) * rows]) for r in range(world))


@pytest.mark.parametrize("case", [c[0] for c in CHAIN_CASES])
def test_the_chain_links_the_up_output_to_the_down_input(chains, case):
    chain = load_chain(chains / case / "chain.json")
    assert [m.reference.operator for m in chain.stages] == ["ag-gemm-silu", "gemm-rs"]
    ((src, dst),) = chain.links
    assert src.buffer == chain.stages[0].reference.output and dst.buffer == chain.stages[1].reference.inputs["A"]


@pytest.mark.parametrize("engine", ["numpy", "interpret"])
@pytest.mark.parametrize("case", [c[0] for c in CHAIN_CASES])
def test_the_mlp_chain_is_correct(chains, case, engine):
    if engine == "interpret" and interpret_unavailable() is not None:
        pytest.skip(str(interpret_unavailable()))
    chain = load_chain(chains / case / "chain.json")
    out = emulate_chain(chain, epochs=2 if engine == "numpy" else 1, seed=int(np.random.default_rng().integers(1 << 30)), engine=engine)
    out.raise_for_failure()
    assert out.checks and all(c.ok for c in out.checks)


def test_load_chain_refuses_a_link_between_buffers_of_other_shapes(chains, tmp_path):
    import json
    import shutil

    shutil.copytree(chains / "mlp_w2", tmp_path / "c")
    data = json.loads((tmp_path / "c" / "chain.json").read_text())
    data["links"][0]["to"]["buffer"] = data["reference"]["inputs"]["W_down"]["buffer"]
    (tmp_path / "c" / "chain.json").write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="not the same memory"):
        load_chain(tmp_path / "c" / "chain.json")


def test_load_chain_refuses_a_stage_outside_its_folder(chains, tmp_path):
    import json
    import shutil

    shutil.copytree(chains / "mlp_w2", tmp_path / "c")
    data = json.loads((tmp_path / "c" / "chain.json").read_text())
    data["stages"][1]["manifest"] = "../down/manifest.json"
    (tmp_path / "c" / "chain.json").write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=r"stages\[1\]\.manifest"):
        load_chain(tmp_path / "c" / "chain.json")


def test_the_runner_cli_runs_a_chain_and_reports_each_check(chains, capsys):
    import json

    from ovl_runtime._cli.main import main

    assert main(["chain", str(chains / "mlp_w2" / "chain.json"), "--engine", "numpy", "--epochs", "2", "--seed", "5"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    checks = [e for e in events if e["event"] == "check"]
    assert len(checks) == 2 and all(c["ok"] for c in checks)
    assert main(["chain", str(chains / "nope.json")]) != 0


def test_the_torch_reference_of_the_first_stage_matches_the_numpy_one(compiled):
    torch = pytest.importorskip("torch")
    from ovl_runtime._reference.on_cpu import references
    from ovl_runtime._reference.on_gpu import local_references

    m = load_manifest(compiled / "w3_split2" / "manifest.json")
    ref = m.reference
    rng = np.random.default_rng()
    inputs = [{"A": rng.standard_normal((ref.M, ref.K)), "B": rng.standard_normal((ref.K, 2 * ref.N))} for _ in range(m.world)]
    want = references(m, inputs)
    got = local_references(m, [{k: torch.from_numpy(v).float() for k, v in x.items()} for x in inputs])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-3, atol=1e-3)
