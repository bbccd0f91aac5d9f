"""AllToAll + GEMM (AutoOverlap's A2A+GEMM, expert-parallel style) compiled by @ovl/tlx-emitter's
compile() from ovl's built-in TMA GEMM body and from a tutorial-style matmul, in both CPU
engines: the numpy engine models the GEMM under the manifest's tile program, the interpreter
runs the emitted source. Every row of the received tensor starts poisoned and is written by
the plan's copies (the rank's own slab by a local copy), each tile waiting on the chunks its
rows meet; the reference multiplies what each rank receives by its own B."""

from __future__ import annotations

import json
from pathlib import Path

import builders
import numpy as np
import pytest

from ovl_runtime import Emulator, emulate, load_manifest
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime.operators.a2a_gemm.reference import received_slabs

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allToAll, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync, readFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const plan = planSignals(allToAll({ tensor: { name: "A", shape: [c.M, c.K], dtype: c.dtype }, axis: 0, mesh: [c.world], split: c.split }));
  const body = c.body === "tutorial" ? ovl.tutorialMatmulBody() : ovl.builtinBody(c.body);
  const r = await ovl.compile({
    name: c.name, kind: "a2a-gemm", plan, body,
    problem: { M: c.M, N: c.N, K: c.K }, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] }, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    # name, world, M, N, K, split, tile, dtype, body
    # 64-row slabs in 32-row chunks under 32-row tiles: one chunk per tile.
    ("w2_split2", 2, 128, 64, 64, 2, (32, 32, 32), "bf16", "gemm_tma_persistent"),
    # 64-row slabs, 3 chunks of 21/21/22 rows under 32-row tiles: tiles wait on two chunks.
    ("w3_off_tiles", 3, 192, 64, 64, 3, (32, 64, 32), "fp16", "gemm_tma_persistent"),
    # A user's tutorial-style matmul, fp32, 4 ranks.
    ("w4_tutorial", 4, 128, 32, 32, 1, (32, 32, 32), "fp32", "tutorial"),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory, "a2a", SCRIPT, ["name", "world", "M", "N", "K", "split", "tile", "dtype", "body"], CASES
    )


def test_the_reference_is_what_each_rank_receives_times_its_b():
    rng = np.random.default_rng(0)
    sends = [rng.standard_normal((6, 2)) for _ in range(3)]
    # Rank 1 receives slab 1 (rows 2..3) of every rank, in rank order.
    assert np.array_equal(received_slabs(sends, 1), np.concatenate([s[2:4] for s in sends]))


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_a2a_gemm_is_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "a2a-gemm"
    received = m.buffer("A")
    assert received.init == "poison" and m.buffer(m.reference.inputs["A"]).symmetric
    out = emulate(m, epochs=2, seed=7, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", ["w3_off_tiles", "w4_tutorial"])
def test_a2a_gemm_is_correct_running_its_own_source(compiled, case):
    out = emulate(load_manifest(compiled / case / "manifest.json"), epochs=1, seed=11, engine="interpret")
    out.raise_for_failure()
    assert all(c.ok for c in out.checks)


@pytest.mark.parametrize("case", ["w2_split2", "w3_off_tiles"])
def test_after_a_launch_the_operand_buffer_holds_what_every_rank_sent(compiled, case):
    """The torch API's weight gradient copies buffer ``A`` after a launch (``_torch_api.registry.OPERAND_BUFFER``) as
    ``AllToAll(x)``: on every rank it holds each rank's slab for it, in rank order, and the caller's rows sit
    in another buffer (the reference input)."""
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.inputs["A"] != "A"
    emu = Emulator(m, seed=5)
    rec, _ = emu.checked_launch(0)
    assert rec.ok
    shape = (m.reference.M, m.reference.K)
    sends = [emu.world.buffers[r][m.reference.inputs["A"]].reshape(shape) for r in range(m.world)]
    for r in range(m.world):
        np.testing.assert_array_equal(emu.world.buffers[r]["A"].reshape(shape), received_slabs(sends, r))


def test_a_missing_copy_leaves_poison_that_the_check_catches(compiled, tmp_path):
    # Drop rank 1's pull of rank 0's slab and its signal from the plan's host ops: the
    # consumer's wait on that chunk times out (the emulation reports it) instead of reading
    # poisoned rows silently.
    d = json.loads((compiled / "w2_split2" / "manifest.json").read_text())
    ops = d["hostOps"][1]["streams"][0]["ops"]
    pull = next(i for i, o in enumerate(ops) if o["src"]["rank"] == 0)
    d["hostOps"][1]["streams"][0]["ops"] = ops[:pull] + ops[pull + 1 :]
    assert len(d["hostOps"][1]["streams"][0]["ops"]) == len(ops) - 1
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / "w2_split2" / k["source"]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(d))
    out = emulate(load_manifest(tmp_path / "m.json"), epochs=1, seed=1, engine="numpy")
    assert out.failures or not all(c.ok for c in out.checks)
