"""GEMM+AllReduce from the compile path (``compile()`` of @ovl/tlx-emitter, operator ``gemm-ar``,
the built-in producer body) in both CPU engines, over several launches with fresh random inputs:
the partitioned AllReduce (direct ReduceScatter after compute, then the reduced slabs gathered
by copy-engine or SM pushes) and DistFuse's tile-wise one (per-tile flags, pushes to the rows'
owner, reduction there and a store of the sum into every rank's output), at worlds 2, 3 and 4,
M off the tile and off the world for the tile-wise one, and bf16 / fp16 / fp32."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import builders
import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.engine import choose_engine
from ovl_runtime._emulate.interpret_load import interpret_unavailable

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allReducePartitioned, allReduceTilewise, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const tile = { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] };
  const C = { tensor: { name: "C", shape: [c.M, c.N], dtype: c.dtype }, src: "C_partial", mesh: [c.world] };
  const plan = planSignals(c.variant === "tilewise"
    ? allReduceTilewise({ ...C, tile: [tile.BM, tile.BN] })
    : allReducePartitioned({ ...C, axis: 0, split: c.split, reduceScatter: "direct", allGather: "swizzle", afterCompute: true }));
  const options = { dtype: c.dtype, ...(c.variant === "tilewise" ? {} : { backend: c.variant === "sm" ? "sm" : "copy-engine" }), commSms: 3 };
  const r = await ovl.compile({ name: c.name, kind: "gemm-ar", plan, body: ovl.builtinBody("gemm_producer"),
    problem: { M: c.M, N: c.N, K: c.K }, tile, groupM: 2, options });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    # name, variant, world, M, N, K, split, tile, dtype
    ("ce_w2", "ce", 2, 128, 64, 64, 2, (32, 32, 32), "bf16"),
    ("sm_w2", "sm", 2, 128, 64, 64, 2, (32, 32, 32), "fp32"),
    ("tilewise_w2", "tilewise", 2, 128, 64, 64, 1, (32, 32, 32), "bf16"),
    # 3 ranks, one chunk of 96 rows each: it is sent once its three 32-row m-blocks are reduced.
    ("ce_w3", "ce", 3, 288, 48, 32, 1, (32, 32, 32), "fp16"),
    ("sm_w3", "sm", 3, 288, 48, 32, 1, (32, 32, 32), "bf16"),
    # M = 150 is neither 3 slabs of whole m-blocks nor whole tiles: the tile-wise owners hold 2, 1, 2 m-blocks.
    ("tilewise_w3_ragged", "tilewise", 3, 150, 40, 32, 1, (32, 16, 32), "fp32"),
    ("ce_w4", "ce", 4, 256, 32, 32, 1, (32, 32, 32), "bf16"),
    # N = 80 is no whole number of 32-column blocks: the broadcast stores are masked.
    ("sm_w4_ragged_n", "sm", 4, 512, 80, 32, 2, (32, 32, 32), "bf16"),
    ("tilewise_w4", "tilewise", 4, 256, 80, 32, 1, (32, 32, 32), "fp16"),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory, "compiled_ar", SCRIPT, ["name", "variant", "world", "M", "N", "K", "split", "tile", "dtype"], CASES
    )


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_gemm_ar_is_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "gemm-ar"
    out = emulate(m, epochs=3, seed=11, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 3 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_gemm_ar_is_correct_running_its_own_source(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert choose_engine(m, "auto") == "interpret"
    out = emulate(m, epochs=2, seed=13, engine="interpret")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


def _without(compiled: Path, case: str, tmp_path: Path, edit) -> Path:
    d = json.loads((compiled / case / "manifest.json").read_text())
    edit(d)
    for f in (compiled / case).iterdir():
        if f.suffix == ".py":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "manifest.json").write_text(json.dumps(d))
    return tmp_path / "manifest.json"


def test_a_missing_gather_copy_is_a_wait_timeout(compiled, tmp_path):
    # Rank 0 never sends its first chunk of reduced rows to rank 1: rank 1's ar_done stream
    # waits on that chunk's slot, so the launch stalls instead of checking an unfilled output.
    def edit(d):
        ops = next(s for s in d["hostOps"][0]["streams"] if s["name"] == "allgather")["ops"]
        ops.remove(next(o for o in ops if o["kind"] == "copy"))

    out = emulate(load_manifest(_without(compiled, "ce_w2", tmp_path, edit)), epochs=1, seed=1, engine="numpy", timeout_s=2.0)
    assert out.failures and out.failures[0].code == "wait-timeout"


def test_the_last_wait_is_on_the_device_and_really_waits(compiled, tmp_path):
    # Over SM stores no host stream waits (a CUDA graph captures the launch); the slot-wait kernel
    # does. Asked for one tile more of rank 1's slab than rank 1 stores, rank 0 times out.
    m = load_manifest(compiled / "sm_w2" / "manifest.json")
    assert all(not s.ops for h in m.host_ops for s in h.streams)
    assert [k.template_kind for k in m.kernels][-1] == "slot-wait"

    def edit(d):
        row = next(t for t in d["tables"] if t["name"] == "ar_done_slots")["values"][0]
        row[1] += 1  # wait_arrivals of rank 0's wait on rank 1's slab

    out = emulate(load_manifest(_without(compiled, "sm_w2", tmp_path, edit)), epochs=1, seed=1, engine="numpy", timeout_s=2.0)
    assert out.failures and out.failures[0].code == "wait-timeout"
    assert out.failures[0].rank == 0


def test_a_missing_tile_push_is_a_wait_timeout(compiled, tmp_path):
    # Rank 1's first push (a tile rank 0 owns) moves nothing and signals nothing: rank 0's
    # reduce of that tile waits for its flag to count every rank's partial, and never sums without it.
    def edit(d):
        row = next(t for t in d["tables"] if t["name"] == "tile_push_rows")["values"][1]
        row[3] = row[4] = 0  # rows, cols
        row[7] = -1  # notify_at

    out = emulate(load_manifest(_without(compiled, "tilewise_w2", tmp_path, edit)), epochs=1, seed=1, engine="numpy", timeout_s=2.0)
    assert out.failures and out.failures[0].code == "wait-timeout"
