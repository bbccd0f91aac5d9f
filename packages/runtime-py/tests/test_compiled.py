"""Operators from the compile path (local bodies transformed by @ovl/tlx-emitter's compile())
run in both CPU engines: the interpreter executes the emitted source itself (the built-in
TMA body and a user's tutorial-style matmul), the numpy engine models the GEMM under the
manifest's tile program. Shapes include chunks that do not fall on tile boundaries, worlds 3
and 6, M not divisible by the tile nor by the world (uneven shards), and bf16 / fp16 / fp32."""

from __future__ import annotations

import importlib
import json
import threading
from pathlib import Path

import builders
import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.engine import choose_engine
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._manifest.shards import rank_rows, row_counts

emulate_mod = importlib.import_module("ovl_runtime._emulate.engine")

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherRing, allGatherSwizzle, planSignals, reduceScatterDirect } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
const cases = JSON.parse(process.argv[4]);
for (const c of cases) {
  const tile = { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] };
  const body = c.body === "tutorial" ? ovl.tutorialMatmulBody() : ovl.builtinBody(c.body);
  let op;
  if (c.kind === "ag-gemm") {
    const o = { tensor: { name: "A", shape: [c.M, c.K], dtype: c.dtype }, axis: 0, mesh: [c.world], split: c.split, side: "push" };
    const plan = planSignals(c.ring ? allGatherRing(o) : allGatherSwizzle(o));
    op = { name: c.name, kind: "ag-gemm", plan, body, problem: { M: c.M, N: c.N, K: c.K }, tile, groupM: 2, options: { dtype: c.dtype } };
  } else {
    const plan = planSignals(reduceScatterDirect({ tensor: { name: "C", shape: [c.M, c.N], dtype: c.dtype }, src: "C_partial", axis: 0, mesh: [c.world], split: c.split, afterCompute: true }));
    op = { name: c.name, kind: "gemm-rs", plan, body, problem: { M: c.M, N: c.N, K: c.K }, tile, groupM: 2, options: { dtype: c.dtype } };
  }
  const r = await ovl.compile(op);
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    # name, kind, body, world, M, N, K, split, tile, dtype, ring
    ("tma_w2", "ag-gemm", "gemm_tma_persistent", 2, 128, 64, 64, 2, (32, 32, 32), "bf16", False),
    ("tutorial_w2_ring", "ag-gemm", "tutorial", 2, 128, 64, 64, 2, (32, 32, 32), "fp32", True),
    # 3 ranks of 48 rows, chunks of 24 rows under 32-row tiles: tiles wait on two chunks.
    ("tma_w3_ragged_chunks", "ag-gemm", "gemm_tma_persistent", 3, 144, 32, 32, 2, (32, 32, 32), "fp16", False),
    # 6 ranks of 16 rows: M = 96 is 3 whole 32-row tiles, each spanning two ranks' shards.
    ("tutorial_w6", "ag-gemm", "tutorial", 6, 96, 32, 32, 1, (32, 32, 32), "bf16", False),
    ("producer_w2", "gemm-rs", "gemm_producer", 2, 128, 64, 64, 2, (32, 32, 32), "bf16", False),
    # GEMM+ReduceScatter in fp16: the partials and their sums rounded to fp16, checked at fp16's tighter tolerance.
    ("producer_w3_fp16", "gemm-rs", "gemm_producer", 3, 192, 64, 64, 1, (32, 32, 32), "fp16", False),
    # M not a multiple of the world: uneven shards (34, 33, 33 rows; 17 x4 and 16 x2 by a ring),
    # stated as the reference's rowCounts.
    ("tma_w3_uneven", "ag-gemm", "gemm_tma_persistent", 3, 100, 32, 32, 2, (32, 32, 32), "fp32", False),
    ("tutorial_w6_uneven_ring", "ag-gemm", "tutorial", 6, 100, 32, 32, 1, (32, 32, 32), "bf16", True),
    # The stream-K tail under the interpreter's 4 programs: 10 tiles leave 2 for the tail, each
    # cut into 2 pieces of 16 K steps; 9 tiles leave 1, cut into 3 pieces of 17, 17 and 14 K steps
    # (a ring plan, so the tail's m-block waits on a chunk that arrives last). Two epochs: the
    # tile counts go back to zero between launches.
    ("streamk_w2_tail", "ag-gemm", "gemm_tma_persistent_streamk", 2, 160, 64, 1024, 2, (32, 32, 32), "bf16", False),
    ("streamk_w3_ring", "ag-gemm", "gemm_tma_persistent_streamk", 3, 96, 96, 1536, 1, (32, 32, 32), "fp32", True),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory, "compiled", SCRIPT, ["name", "kind", "body", "world", "M", "N", "K", "split", "tile", "dtype", "ring"], CASES
    )


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_compiled_operators_are_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    out = emulate(m, epochs=2, seed=3, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_compiled_operators_are_correct_running_their_own_source(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert choose_engine(m, "auto") == "interpret"
    out = emulate(m, epochs=2, seed=5, engine="interpret")
    out.raise_for_failure()
    assert all(c.ok for c in out.checks)


@pytest.mark.parametrize("case,counts", [("tma_w3_uneven", [34, 33, 33]), ("tutorial_w6_uneven_ring", [17, 17, 17, 17, 16, 16])])
def test_uneven_shards_are_stated_rank_by_rank(compiled, case, counts):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.rows_per_rank is None
    assert row_counts(m) == tuple(counts)
    assert [rank_rows(m, r)[0] for r in range(m.world)] == [sum(counts[:r]) for r in range(m.world)]


def test_a_wrong_tile_program_is_caught(compiled, tmp_path, monkeypatch):
    # Every rank claims it holds every row (no waits): the numpy engine computes from
    # unfilled rows and the check fails instead of passing silently. The emulator's streams
    # are threads, so the copies could win the race the missing waits open; holding every
    # host stream until each rank's consumer has returned makes the race go the bad way
    # every time, as it may on a GPU.
    consumed = threading.Barrier(3)  # both ranks' consumers and the releasing thread
    consumer = emulate_mod.TEMPLATES["local-consumer"]

    def consume_then_release(ctx):
        consumer(ctx)
        consumed.wait(timeout=30)

    host_stream = emulate_mod.Emulator._host_stream

    def held_host_stream(self, s, rank, abort):
        make = host_stream(self, s, rank, abort)

        def held(thread, monitor):
            body = make(thread, monitor)

            def run():
                released.wait(timeout=30)
                body()

            return run

        return held

    released = threading.Event()
    threading.Thread(target=lambda: (consumed.wait(timeout=60), released.set()), daemon=True).start()
    monkeypatch.setitem(emulate_mod.TEMPLATES, "local-consumer", consume_then_release)
    monkeypatch.setattr(emulate_mod.Emulator, "_host_stream", held_host_stream)
    d = json.loads((compiled / "tma_w2" / "manifest.json").read_text())
    for k in d["kernels"]:
        k["tileProgram"]["slots"] = []
    (tmp_path / "m.json").write_text(json.dumps(d))
    src = compiled / "tma_w2" / d["kernels"][0]["source"]
    (tmp_path / d["kernels"][0]["source"]).write_text(src.read_text())
    out = emulate(load_manifest(tmp_path / "m.json"), epochs=1, seed=1, engine="numpy")
    assert out.failures or not all(c.ok for c in out.checks)
