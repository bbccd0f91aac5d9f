"""moe-rs (GroupGEMM + Scatter + TopK-reduce + ReduceScatter, routing on the device): the slab
notify counts against their numpy reference, the kernels under Triton's interpreter against the
numpy and torch references with fresh random inputs and uneven routing (an expert with no tokens,
every token on one expert), and bad sizes refused before any launch."""

from __future__ import annotations

import json
from pathlib import Path

import builders
import numpy as np
import pytest
import torch

from ovl_runtime import emulate, load_manifest
from ovl_runtime.emulate import choose_engine
from ovl_runtime.errors import ManifestError
from ovl_runtime.interpret import interpret_unavailable
from ovl_runtime.moe import draw_routing, moe_align_reference
from ovl_runtime.moe_rs import check_moe_rs, moe_rs_one_device, moe_rs_reference, moe_rs_reference_torch, slab_cover_reference

SCRIPT = """
const ovl = await import(process.argv[1]);
const { reduceScatterDirect, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const plan = planSignals(reduceScatterDirect({
    tensor: { name: "moe_out", shape: [c.T * c.k, c.H], dtype: c.dtype }, src: "moe_partial", axis: 0,
    mesh: [c.world], split: c.split, afterCompute: true,
  }));
  const moe = c.choices === null ? { experts: c.E, topk: c.k } : { experts: c.E, topk: c.k, choices: c.choices };
  const r = await ovl.compile({
    name: c.name, kind: "moe-rs", plan, body: ovl.builtinBody("moe_gemm_scatter"),
    problem: { M: c.T, N: c.H, K: c.I }, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] },
    moe, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

# name, world, T (tokens), H (hidden = N), I (each rank's intermediate slice = K), split, tile, dtype, E, k, choices
COMPILED = [
    # Two slabs per rank, three n-tiles (H not a multiple of BN), every expert drawn.
    ("w2_split2", 2, 32, 40, 24, 2, (16, 16, 16), "fp32", 4, 2, None),
    # Every token on one expert (top-k 1): one long group covering every slab.
    ("w2_one_expert", 2, 32, 32, 16, 1, (16, 16, 16), "fp32", 4, 1, [2]),
    # Experts 2 and 4 never drawn (no tokens); four ranks, slabs of 6 tokens.
    ("w4_empty_experts", 4, 48, 24, 16, 2, (16, 16, 16), "bf16", 5, 2, [0, 1, 3]),
    # Three ranks, top-k 3, fp16.
    ("w3_top3", 3, 24, 16, 16, 1, (16, 16, 16), "fp16", 3, 3, None),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory, "moe_rs", SCRIPT, ["name", "world", "T", "H", "I", "split", "tile", "dtype", "E", "k", "choices"], COMPILED
    )


def _needs_interpreter() -> None:
    if interpret_unavailable() is not None:
        pytest.skip(str(interpret_unavailable()))


@pytest.mark.parametrize("case", [c[0] for c in COMPILED])
def test_compiled_moe_rs_is_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "moe-rs"
    kinds = [k.template_kind for k in m.kernels]
    assert kinds == ["moe-align-count", "moe-align-scatter", "moe-slab-expect", "local-producer", "moe-topk-reduce-rs"]
    out = emulate(m, epochs=3, seed=5, engine="numpy")  # the slots and targets carry over: later launches wait for their own
    out.raise_for_failure()
    assert len(out.checks) == 3 and all(c.ok for c in out.checks)


@pytest.mark.parametrize("case", [c[0] for c in COMPILED])
def test_compiled_moe_rs_is_correct_running_its_own_source(compiled, case):
    _needs_interpreter()
    m = load_manifest(compiled / case / "manifest.json")
    assert choose_engine(m, "auto") == "interpret"
    out = emulate(m, epochs=2, seed=7, engine="interpret")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


def _edited(compiled: Path, tmp_path: Path, case: str, edit) -> Path:
    d = json.loads((compiled / case / "manifest.json").read_text())
    edit(d)
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / case / k["source"]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(d))
    return tmp_path / "m.json"


def _more_notifies_expected(d: dict) -> None:
    """Every covering block now counts one notify more than the producers send: each slab misses notifies."""
    d["waitTimeoutNs"] = 300_000_000
    k = next(k for k in d["kernels"] if k["template"]["kind"] == "moe-slab-expect")
    arg = next(a for a in k["args"] if a["name"] == "NOTIFIES")
    arg["value"]["value"] += 1


@pytest.mark.parametrize("engine", ["numpy", "interpret"])
def test_a_missing_notify_times_out_naming_the_slab_slot(compiled, tmp_path, engine):
    if engine == "interpret":
        _needs_interpreter()
    m = load_manifest(_edited(compiled, tmp_path, "w2_split2", _more_notifies_expected))
    out = emulate(m, epochs=1, seed=2, engine=engine)
    assert out.failures
    text = " ".join(str(f) for f in out.failures)
    # rank r's first slab is slot 2r (two slabs per rank); the reducer waits there first
    assert "wait on signal slot 0" in text or "wait on signal slot 2" in text, text


def test_the_weights_are_the_same_on_every_rank_and_fresh_per_launch(compiled):
    from ovl_runtime.emulate import EmulatedWorld

    m = load_manifest(compiled / "w4_empty_experts" / "manifest.json")
    w = EmulatedWorld.allocate(m)
    rng = np.random.default_rng()
    w.init(rng)
    first = [w.buffers[r]["moe_topk_weights"].copy() for r in range(m.world)]
    w.init(rng)
    again = w.buffers[0]["moe_topk_weights"].copy()
    assert all(np.array_equal(first[0], f) for f in first[1:])
    assert not np.array_equal(first[0], again)
    assert not np.array_equal(w.buffers[0]["moe_h"], w.buffers[1]["moe_h"])  # h is each rank's own


def test_owners_are_refused_on_a_consumer(compiled, tmp_path):
    def edit(d):
        k = next(k for k in d["kernels"] if k["template"]["kind"] == "local-producer")
        k["tileProgram"]["role"] = "consumer"

    with pytest.raises(ManifestError):
        load_manifest(_edited(compiled, tmp_path, "w2_split2", edit))


def test_a_moe_rs_reference_without_weights_is_refused(compiled, tmp_path):
    def edit(d):
        del d["reference"]["inputs"]["weights"]

    with pytest.raises(ManifestError, match="moe-rs needs inputs"):
        load_manifest(_edited(compiled, tmp_path, "w2_split2", edit))


# ---- the runner's kernels launched by hand (moe_rs_one_device) ----

CASES = [
    # world, T, k, E, I, H, slab_t, choices
    (2, 32, 2, 4, 24, 40, 8, None),
    (2, 32, 1, 4, 16, 32, 16, [2]),  # every token on one expert
    (4, 48, 2, 5, 16, 24, 4, [0, 1, 3]),  # experts 2 and 4 without tokens
    (1, 16, 3, 3, 8, 16, None, None),
]


def _inputs(rng, world, T, k, E, inter, H, choices):
    ids = draw_routing(rng, T, k, E, choices)
    wts = rng.random((T, k)).astype(np.float32)
    h = [rng.standard_normal((T * k, inter)).astype(np.float32) for _ in range(world)]
    w2 = [(rng.standard_normal((E, inter, H)) / np.sqrt(inter)).astype(np.float32) for _ in range(world)]
    return ids, wts, h, w2


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize(("world", "T", "k", "E", "inter", "H", "slab_t", "choices"), CASES)
def test_moe_rs_matches_the_references_over_launches(world, T, k, E, inter, H, slab_t, choices):
    rng = np.random.default_rng()
    state: dict = {}
    for _ in range(2):  # the signal slots and targets carry over: a second launch waits for its own notifies
        ids, wts, h, w2 = _inputs(rng, world, T, k, E, inter, H, choices)
        got = moe_rs_one_device(
            torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts),
            slab_t=slab_t, block_m=16, block_n=16, block_k=16, block_t=8, num_sms=3, state=state,
        )  # fmt: skip
        want = moe_rs_reference(h, w2, ids, wts)
        tref = moe_rs_reference_torch(
            torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts)
        )
        for r in range(world):
            np.testing.assert_allclose(got[r].numpy(), want[r], rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(tref[r].numpy(), want[r], rtol=1e-4, atol=1e-4)
    # every slab collected, on its owner, exactly the notifies its target counted (and no rank else got any)
    slabs = state["sig"].shape[1] - 1  # the last slot: READY, one add per launch by moe_slab_expect
    per = slabs // world
    for r in range(world):
        mine = slice(r * per, (r + 1) * per)
        np.testing.assert_array_equal(state["sig"][r, mine].numpy(), state["expect"][r, mine].numpy())
        assert int(state["sig"][r, :slabs].sum()) == int(state["sig"][r, mine].sum())
        assert int(state["expect"][r, mine].min()) > 0
        assert int(state["sig"][r, slabs]) == 2 == int(state["epoch"][r, 0])


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
def test_slab_targets_count_the_blocks_that_cover_each_slab():
    rng = np.random.default_rng()
    world, T, k, E, inter, H, slab_t = 2, 64, 2, 6, 8, 16, 8
    ids, wts, h, w2 = _inputs(rng, world, T, k, E, inter, H, [0, 4, 5])
    state: dict = {}
    moe_rs_one_device(
        torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts),
        slab_t=slab_t, block_m=16, block_n=16, block_k=16, block_t=8, state=state,
    )  # fmt: skip
    sorted_ids, _, blocks = moe_align_reference(ids, E, 16)
    cover = slab_cover_reference(sorted_ids, blocks, 16, k, slab_t, T // slab_t)
    assert cover.min() >= 1
    for r in range(world):
        np.testing.assert_array_equal(state["expect"][r].numpy(), cover * world * 1)  # H = 16: one n-tile


def test_bad_sizes_are_refused_before_any_launch():
    with pytest.raises(ValueError, match="top-k \\(3\\) exceeds"):
        check_moe_rs(16, 3, 2, 8, 8, 2)
    with pytest.raises(ValueError, match="divide evenly over the world"):
        check_moe_rs(30, 2, 4, 8, 8, 4)
    with pytest.raises(ValueError, match="positive divisor of T/W = 8"):
        check_moe_rs(16, 2, 4, 8, 8, 2, slab_t=3)
    ids = torch.zeros((30, 2), dtype=torch.int32)
    with pytest.raises(ValueError, match="divide evenly"):
        moe_rs_one_device(torch.zeros((4, 60, 8)), torch.zeros((4, 4, 8, 8)), ids, torch.zeros((30, 2)))
    with pytest.raises(ValueError, match="int32"):
        moe_rs_one_device(torch.zeros((2, 32, 8)), torch.zeros((2, 4, 8, 8)), ids.long()[:16], torch.zeros((16, 2)))


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
def test_a_slab_that_never_completes_times_out_with_its_slot():
    from ovl_runtime.errors import WaitTimeout

    rng = np.random.default_rng()
    world, T, k, E, inter, H = 2, 16, 2, 3, 8, 16
    ids, wts, h, w2 = _inputs(rng, world, T, k, E, inter, H, None)
    args = (torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts))
    state: dict = {}
    moe_rs_one_device(*args, slab_t=4, block_m=16, block_n=16, block_k=16, block_t=4, state=state)
    state["expect"][1, 3] += 5  # rank 1's slab 3 (its second) now waits for notifies no producer sends
    with pytest.raises(WaitTimeout, match="rank 1: wait on signal slot 3") as info:
        moe_rs_one_device(*args, slab_t=4, block_m=16, block_n=16, block_k=16, block_t=4, state=state, timeout_ns=50_000_000)
    assert info.value.expected - info.value.seen == 5


def test_the_torch_api_refuses_bad_input_before_any_launch():
    from ovl_runtime.errors import UsageError
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.moe_ops import moe_grouped_matmul_reduce_scatter

    g = OneGpuGroup(2)
    h, w = torch.zeros((2, 32, 8), dtype=torch.bfloat16), torch.zeros((2, 4, 8, 16), dtype=torch.bfloat16)
    ids, wts = torch.zeros((2, 16, 2), dtype=torch.int32), torch.zeros((2, 16, 2))
    with pytest.raises(UsageError, match="CUDA"):
        moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g)
    with pytest.raises(UsageError, match="takes torch.bfloat16"):
        moe_grouped_matmul_reduce_scatter(h.float(), ids, wts, w.float(), g)
