"""AllGather + grouped GEMM (the MoE expert GEMM) compiled from ovl's built-in grouped body by
@ovl/tlx-emitter's compile(), in both CPU engines: the interpreter runs the emitted source
(B [E, K, N] indexed by the group table), the numpy engine models the grouped GEMM under the
manifest's tile program. Worlds 2 and 3, chunks on and off tile boundaries, uneven routing,
an expert with no m-block, every m-block on one expert; the references in numpy and torch."""

from __future__ import annotations

import json
from pathlib import Path

import builders
import numpy as np
import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.engine import choose_engine
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._reference.on_cpu import references
from ovl_runtime.errors import ManifestError
from ovl_runtime.operators.grouped_gemm.reference import expert_runs, grouped_matmul

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherRing, allGatherSwizzle, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const o = { tensor: { name: "A", shape: [c.M, c.K], dtype: c.dtype }, axis: 0, mesh: [c.world], split: c.split, side: "push" };
  const plan = planSignals(c.ring ? allGatherRing(o) : allGatherSwizzle(o));
  const r = await ovl.compile({
    name: c.name, kind: "ag-grouped-gemm", plan, body: ovl.builtinBody("grouped_gemm"),
    problem: { M: c.M, N: c.N, K: c.K }, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] },
    groups: { experts: c.experts, mblockExpert: c.routing }, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

# M = 192, N = K = 64, 32-row tiles: 6 m-blocks.
CASES = [
    # name, world, M, N, K, split, tile, dtype, ring, experts, routing
    # 96 rows a rank in chunks of 48 under 32-row tiles: m-blocks wait on two chunks; expert 1 has none.
    ("w2_uneven", 2, 192, 64, 64, 2, (32, 32, 32), "bf16", False, 4, [0, 0, 0, 2, 3, 3]),
    # Every m-block on one expert of three.
    ("w2_one_expert_ring", 2, 192, 64, 64, 1, (32, 64, 32), "fp32", True, 3, [2, 2, 2, 2, 2, 2]),
    # Each rank's shard grouped on its own: the global routing is not sorted.
    ("w3_per_rank_groups", 3, 192, 64, 64, 1, (32, 32, 32), "fp16", False, 3, [0, 2, 0, 1, 2, 2]),
    ("w3_ring_split", 3, 192, 64, 64, 2, (32, 32, 32), "bf16", True, 5, [4, 4, 0, 1, 1, 1]),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory, "grouped", SCRIPT, ["name", "world", "M", "N", "K", "split", "tile", "dtype", "ring", "experts", "routing"], CASES
    )


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_grouped_operators_are_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "ag-grouped-gemm" and m.reference.group_table == "group_of_mblock"
    out = emulate(m, epochs=2, seed=3, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_grouped_operators_are_correct_running_their_own_source(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert choose_engine(m, "auto") == "interpret"
    out = emulate(m, epochs=2, seed=5, engine="interpret")
    out.raise_for_failure()
    assert all(c.ok for c in out.checks)


def _edited(compiled: Path, tmp_path: Path, case: str, edit) -> Path:
    d = json.loads((compiled / case / "manifest.json").read_text())
    edit(d)
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / case / k["source"]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(d))
    return tmp_path / "m.json"


def _table(d: dict) -> dict:
    return next(t for t in d["tables"] if t["name"] == d["reference"]["groupTable"])


def test_a_routing_that_differs_from_the_kernels_is_caught(compiled, tmp_path):
    # The kernel computes with expert 0 everywhere, the reference with the real routing
    # (through a second table): the check fails instead of passing silently.
    def edit(d):
        t = _table(d)
        d["tables"].append({"name": "other", "dtype": "int32", "values": [list(r) for r in t["values"]]})
        d["reference"]["groupTable"] = "other"
        t["values"] = [[0] * len(r) for r in t["values"]]

    out = emulate(load_manifest(_edited(compiled, tmp_path, "w2_uneven", edit)), epochs=1, seed=1, engine="numpy")
    assert out.failures or not all(c.ok for c in out.checks)


@pytest.mark.parametrize(
    "fault,message",
    [
        ("out-of-range", "outside \\[0, 4\\)"),
        ("per-rank", "the same on every rank"),
        ("missing", "needs groupTable"),
        ("length", "do not divide M"),
    ],
)
def test_bad_group_tables_are_refused_when_loaded(compiled, tmp_path, fault, message):
    def edit(d):
        t = _table(d)
        if fault == "out-of-range":
            t["values"] = [[*r[:-1], 4] for r in t["values"]]
        elif fault == "per-rank":
            t["values"][1] = [*t["values"][1][:-1], 1]
        elif fault == "missing":
            del d["reference"]["groupTable"]
        else:
            t["values"] = [[*r, 0] for r in t["values"]]

    with pytest.raises(ManifestError, match=message):
        load_manifest(_edited(compiled, tmp_path, "w2_uneven", edit))


def test_the_references_multiply_each_m_block_by_its_expert(compiled):
    m = load_manifest(compiled / "w3_per_rank_groups" / "manifest.json")
    rng = np.random.default_rng(0)
    M, N, K, E = 192, 64, 64, 3
    rows = M // 3
    inputs = [{"A": rng.standard_normal((rows, K)), "B": rng.standard_normal((E, K, N))} for _ in range(3)]
    full = np.concatenate([x["A"] for x in inputs])
    routing = [0, 2, 0, 1, 2, 2]
    assert expert_runs(routing, 32) == [(0, 32, 0), (32, 64, 2), (64, 96, 0), (96, 128, 1), (128, 192, 2)]
    want = [np.concatenate([full[32 * mb : 32 * (mb + 1)] @ x["B"][e] for mb, e in enumerate(routing)]) for x in inputs]
    got = references(m, inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_allclose(grouped_matmul(full, inputs[0]["B"], 32, routing), want[0], rtol=1e-12)
    torch = pytest.importorskip("torch")
    from ovl_runtime._reference.on_gpu import local_references

    t = local_references(m, [{k: torch.from_numpy(v).float() for k, v in x.items()} for x in inputs])
    for g, w in zip(t, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-3)
