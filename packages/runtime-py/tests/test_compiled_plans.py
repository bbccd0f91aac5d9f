"""Plans the copy-engine backend realises beyond push rings and swizzles, compiled by
@ovl/tlx-emitter's compile() and run in both CPU engines: the pull ring (host waits on a
peer's slot: the manifest's ``wait`` names the rank), the hierarchical AllGather on a 2-D
mesh (its inter-node pulls wait on the peer's intra-node pulls), and plans with collective
ops (``collectiveDirect``), which compile() decomposes into P2P transfers — an AllGather
into pushes for AG+GEMM, a ReduceScatter into the deliveries and ``rs-reduce`` of GEMM+RS."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._manifest.types import WaitOp
from ovl_runtime.errors import RunnerError

EMITTER = Path(__file__).resolve().parents[2] / "tlx-emitter" / "dist" / "index.js"
PLAN_PKG = EMITTER.parents[2] / "chunk-plan" / "dist" / "index.js"

SCRIPT = """
const ovl = await import(process.argv[1]);
const cp = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const tile = { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] };
  const tensor = c.kind === "ag-gemm" ? { name: "A", shape: [c.M, c.K], dtype: c.dtype } : { name: "C", shape: [c.M, c.N], dtype: c.dtype };
  const o = { tensor, axis: 0, mesh: c.mesh, split: c.split };
  let plan;
  if (c.plan === "ring-pull") plan = cp.allGatherRing({ ...o, side: "pull" });
  else if (c.plan === "hierarchical") plan = cp.allGatherHierarchical(o);
  else if (c.plan === "hierarchical-pipelined") plan = cp.allGatherHierarchical({ ...o, schedule: "pipelined" });
  else if (c.plan === "direct-ag") plan = cp.collectiveDirect({ tensor, axis: 0, mesh: c.mesh, collective: "all-gather" });
  else if (c.plan === "direct-rs") plan = cp.collectiveDirect({ tensor, src: "C_partial", axis: 0, mesh: c.mesh, collective: "reduce-scatter" });
  else throw new Error(c.plan);
  const body = ovl.builtinBody(c.kind === "ag-gemm" ? "gemm_tma_persistent" : "gemm_producer");
  const r = await ovl.compile({ name: c.name, kind: c.kind, plan: cp.planSignals(plan), body, problem: { M: c.M, N: c.N, K: c.K }, tile, groupM: 2, options: { dtype: c.dtype } });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    # name, kind, plan, mesh, M, N, K, split, tile, dtype
    ("ring_pull_w3", "ag-gemm", "ring-pull", [3], 96, 32, 32, 1, (32, 32, 32), "bf16"),
    ("ring_pull_w4_split2", "ag-gemm", "ring-pull", [4], 256, 64, 32, 2, (32, 32, 32), "fp32"),
    ("hier_2x2", "ag-gemm", "hierarchical", [2, 2], 256, 32, 32, 2, (32, 32, 32), "bf16"),
    ("hier_2x3_pipelined", "ag-gemm", "hierarchical-pipelined", [2, 3], 192, 32, 32, 1, (32, 32, 32), "fp16"),
    ("direct_ag_w3", "ag-gemm", "direct-ag", [3], 96, 32, 32, 1, (32, 32, 32), "bf16"),
    ("direct_rs_w2", "gemm-rs", "direct-rs", [2], 128, 64, 64, 1, (32, 32, 32), "bf16"),
]
NAMES = [c[0] for c in CASES]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    node = shutil.which("node")
    if node is None or not EMITTER.exists() or not PLAN_PKG.exists():
        pytest.skip(f"needs node and the built {EMITTER} and {PLAN_PKG}")
    out = tmp_path_factory.mktemp("compiled_plans")
    keys = ["name", "kind", "plan", "mesh", "M", "N", "K", "split", "tile", "dtype"]
    subprocess.run(
        [
            node,
            "--input-type=module",
            "-e",
            SCRIPT,
            EMITTER.as_uri(),
            str(out),
            PLAN_PKG.as_uri(),
            json.dumps([dict(zip(keys, c)) for c in CASES]),
        ],
        check=True,
        timeout=120,
    )
    return out


def _waits(m):
    return [(h.rank, op) for h in m.host_ops for s in h.streams for op in s.ops if isinstance(op, WaitOp)]


def test_a_pull_ring_waits_on_the_peer_that_pulled_first(compiled):
    m = load_manifest(compiled / "ring_pull_w3" / "manifest.json")
    waits = _waits(m)
    # Rank r's step 2 forwards what rank r - 1 pulled at step 1: a wait on r - 1's slot.
    assert waits and all(op.rank == (r - 1) % 3 for r, op in waits)
    raw = json.loads((compiled / "ring_pull_w3" / "manifest.json").read_text())
    assert all(o.get("rank") is not None for h in raw["hostOps"] for s in h["streams"] for o in s["ops"] if o["kind"] == "wait")


def test_a_decomposed_all_gather_pushes_to_every_peer(compiled):
    m = load_manifest(compiled / "direct_ag_w3" / "manifest.json")
    assert not _waits(m)
    for h in m.host_ops:
        targets = sorted(op.dst.rank for s in h.streams for op in s.ops)
        assert targets == sorted(q for q in range(3) if q != h.rank)


@pytest.mark.parametrize("case", NAMES)
def test_compiled_plans_are_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    out = emulate(m, epochs=2, seed=3, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", NAMES)
def test_compiled_plans_are_correct_running_their_own_source(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    out = emulate(m, epochs=2, seed=5, engine="interpret")
    out.raise_for_failure()
    assert all(c.ok for c in out.checks)


def test_a_remote_wait_on_a_slot_nobody_writes_is_reported_on_that_rank(compiled, tmp_path):
    # Point every remote wait at a slot of the peer that no copy signals: the launch stalls
    # and the report names the peer's rank and slot, not the issuing rank's.
    d = json.loads((compiled / "ring_pull_w3" / "manifest.json").read_text())
    spare = d["signals"]["slots"]
    d["signals"]["slots"] = spare + 1
    for b in d["buffers"]:
        if b["name"] == d["signals"]["buffer"]:
            b["shape"] = [spare + 1]
    d["waitTimeoutNs"] = 200_000_000
    for h in d["hostOps"]:
        for s in h["streams"]:
            for o in s["ops"]:
                if o["kind"] == "wait":
                    o["slot"] = spare
    (tmp_path / "manifest.json").write_text(json.dumps(d))
    for k in d["kernels"]:
        shutil.copy(compiled / "ring_pull_w3" / k["source"], tmp_path / k["source"])
    out = emulate(load_manifest(tmp_path / "manifest.json"), epochs=1, seed=1, engine="numpy")
    with pytest.raises(RunnerError) as e:
        out.raise_for_failure()
    assert f"slot {spare}" in str(e.value)


def test_a_wait_naming_a_rank_outside_the_world_is_refused(compiled, tmp_path):
    d = json.loads((compiled / "ring_pull_w3" / "manifest.json").read_text())
    for h in d["hostOps"]:
        for s in h["streams"]:
            for o in s["ops"]:
                if o["kind"] == "wait":
                    o["rank"] = 7
    (tmp_path / "manifest.json").write_text(json.dumps(d))
    for k in d["kernels"]:
        shutil.copy(compiled / "ring_pull_w3" / k["source"], tmp_path / k["source"])
    with pytest.raises(Exception, match="outside the world"):
        load_manifest(tmp_path / "manifest.json")
