"""Sequence-parallel attention with its KV gathered (``ag-attention``), compiled from ovl's
built-in flash-attention body by @ovl/tlx-emitter's compile() and run by the interpreter
engine (the emitted source itself under Triton's interpreter): worlds 2 and 3, split 1 and
2, ring and swizzle plans, chunks on and off kv-block boundaries, causal and not, MHA and
GQA. The numpy engine models the body under its arrival groups (``operators/ag_attention/emulate.py``); the numpy
reference is checked against a direct softmax; bad attention fields are refused on load."""

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
from ovl_runtime.operators.ag_attention.spec import attention, attention_spec

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherRing, allGatherSwizzle, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const K = 2 * c.kvHeads * c.D;
  const o = { tensor: { name: "kv", shape: [c.S, K], dtype: c.dtype }, axis: 0, mesh: [c.world], split: c.split, side: "push" };
  const plan = planSignals(c.ring ? allGatherRing(o) : allGatherSwizzle(o));
  const attention = { S: c.S, heads: c.heads, kvHeads: c.kvHeads, headDim: c.D, causal: c.causal };
  const r = await ovl.compile({
    name: c.name, kind: "ag-attention", plan, body: ovl.builtinBody("flash_attention"),
    problem: ovl.attentionGemmView(attention), attention, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.D },
    options: { dtype: c.dtype, numStages: 1 },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

CASES = [
    # name, world, S, heads, kvHeads, D, split, (BLOCK_M, BLOCK_N), dtype, ring, causal
    # 64 rows a rank in chunks of 32 under 32-row kv blocks: chunks on block boundaries.
    ("w2_swizzle_mha", 2, 128, 2, 2, 16, 2, (32, 32), "fp32", False, False),
    # 48 rows a rank in chunks of 24 under 16-row kv blocks: blocks meet two chunks.
    ("w2_ring_causal_gqa", 2, 96, 4, 2, 16, 2, (16, 16), "bf16", True, True),
    # 32 rows a rank under 64-row kv blocks: every block spans two ranks' shards.
    ("w3_swizzle_causal_gqa", 3, 96, 4, 1, 32, 1, (32, 64), "fp16", False, True),
    # 64 rows a rank in chunks of 32, 16-row query blocks, 32-row kv blocks.
    ("w3_ring_split_mha", 3, 192, 2, 2, 16, 2, (16, 32), "bf16", True, False),
    # 80 rows a rank in chunks of 40 under 32-row kv blocks; causal ring.
    ("w2_ring_causal_off_blocks", 2, 160, 3, 3, 16, 2, (32, 32), "fp32", True, True),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory,
        "attention",
        SCRIPT,
        ["name", "world", "S", "heads", "kvHeads", "D", "split", "tile", "dtype", "ring", "causal"],
        CASES,
    )


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_attention_operators_are_correct_running_their_own_source(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "ag-attention"
    assert choose_engine(m, "auto") == "interpret"
    out = emulate(m, epochs=2, seed=7, engine="interpret")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


def test_the_kv_loop_waits_on_every_chunk_a_block_meets(compiled):
    # 16-row kv blocks over 24-row chunks: some block meets two chunks, so two slot columns.
    m = load_manifest(compiled / "w2_ring_causal_gqa" / "manifest.json")
    (k,) = m.kernels
    assert k.template_params["slotColumns"] == 2
    src = (compiled / "w2_ring_causal_gqa" / k.source).read_text()
    # The three kv loops (causal off-diagonal and diagonal, non-causal) wait once per arrival group,
    # before the loop over its blocks: no wait inside the kv loops Triton pipelines. The causal ones
    # run over each group's blocks clipped by their bounds, with no if on the block.
    loops = [i for i in range(len(src)) if src.startswith("for it in tl.range(", i)]
    assert len(loops) == 3 and src.count("wait_slot(") == 3
    assert "ovl_lo + kv_diag - tl.load(ovl_kv_group_block + ovl_g)" in src
    assert "if kv_blk < kv_end" not in src and "if kv_diag <= kv_blk" not in src
    for at in loops:
        body = src[at : src.index("_attend_block(", at)]
        assert "wait_slot" not in body and "ovl_slot" not in body
        assert src.rindex("wait_slot(", 0, at) > src.rindex("for ovl_g in", 0, at)
    # Every block visited in group g is covered by the slots of groups 0..g, on every rank.
    assert "kv_blk = (ovl_m + 3 * ovl_rank) % 6" in src  # the visit order of this ring plan
    t = {x.name: np.asarray(x.values) for x in m.tables}
    for r in range(m.world):
        start, at, waits = (t[n][r] for n in ("ovl_kv_group_start", "ovl_kv_group_wait_at", "ovl_kv_group_waits"))
        order = [(p + 3 * r) % 6 for p in range(6)]
        for g in range(len(start) - 1):
            covered = set(waits[: at[g + 1]].tolist())
            for p in range(start[g], start[g + 1]):
                need = {int(t[c][r][order[p]]) for c in ("ovl_wait0", "ovl_wait1")} - {-1}
                assert need <= covered, (r, g, p, need, covered)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_the_numpy_engine_models_the_attention_body_under_its_groups(compiled, case):
    # Group by group: its waits, then its kv blocks as they are then; the output over what was read.
    m = load_manifest(compiled / case / "manifest.json")
    out = emulate(m, epochs=2, seed=3, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


def test_the_numpy_engine_refuses_a_kv_loop_that_skips_a_block(compiled, tmp_path):
    d = json.loads((compiled / "w2_swizzle_mha" / "manifest.json").read_text())
    start = next(t for t in d["tables"] if t["name"] == "ovl_kv_group_start")
    start["values"][1] = [*start["values"][1][:-1], start["values"][1][-1] - 1]  # the last group stops a block short
    (tmp_path / "m.json").write_text(json.dumps(d))
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / "w2_swizzle_mha" / k["source"]).read_text())
    out = emulate(load_manifest(tmp_path / "m.json"), epochs=1, seed=1, engine="numpy")
    assert any("never reads kv blocks" in str(f) for f in out.failures), out.failures


def test_a_wrong_causality_is_caught(compiled, tmp_path):
    # The kernel is causal, the reference is told it is not: the check fails.
    d = json.loads((compiled / "w2_ring_causal_gqa" / "manifest.json").read_text())
    d["reference"]["attention"]["causal"] = False
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / "w2_ring_causal_gqa" / k["source"]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(d))
    out = emulate(load_manifest(tmp_path / "m.json"), epochs=1, seed=2, engine="interpret")
    assert out.failures or not all(c.ok for c in out.checks)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["reference"].pop("attention"), "needs attention"),
        (lambda d: d["reference"]["attention"].update(kvHeads=3), "multiple of kvHeads"),
        (lambda d: d["reference"]["attention"].update(headDim=32), "must be H·D"),
        (lambda d: d["reference"]["inputs"].pop("KV"), "needs inputs Q and KV"),
    ],
)
def test_bad_attention_references_are_refused_when_loaded(compiled, tmp_path, edit, message):
    d = json.loads((compiled / "w2_swizzle_mha" / "manifest.json").read_text())
    edit(d)
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / "w2_swizzle_mha" / k["source"]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(d))
    with pytest.raises(ManifestError, match=message):
        load_manifest(tmp_path / "m.json")


def _softmax_attention(q, k, v, scale, causal, q_start):
    s = q @ k.T * scale
    if causal:
        s = np.where(np.arange(k.shape[0])[None, :] <= q_start + np.arange(q.shape[0])[:, None], s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)) @ v


def test_the_references_attend_each_rank_s_queries_to_every_key(compiled):
    m = load_manifest(compiled / "w3_swizzle_causal_gqa" / "manifest.json")
    a = attention_spec(m)
    assert (a.heads, a.kv_heads, a.head_dim, a.causal) == (4, 1, 32, True)
    assert a.scale == pytest.approx(32**-0.5)
    rng = np.random.default_rng(0)
    S, world, H, G, D = 96, 3, 4, 1, 32
    rows = S // world
    inputs = [{"Q": rng.standard_normal((rows, H * D)), "KV": rng.standard_normal((rows, 2 * G * D))} for _ in range(world)]
    kv = np.concatenate([x["KV"] for x in inputs])
    got = references(m, inputs)
    for r in range(world):
        want = np.concatenate(
            [_softmax_attention(inputs[r]["Q"][:, h * D : (h + 1) * D], kv[:, :D], kv[:, D:], a.scale, True, r * rows) for h in range(H)],
            axis=1,
        )
        np.testing.assert_allclose(got[r], want, rtol=1e-10, atol=1e-12)
    # Non-causal: every rank's queries see every key, whatever their position.
    flat = attention(inputs[0]["Q"], kv, attention_spec(m).__class__(H, G, D, False, a.scale), q_start=0)
    shifted = attention(inputs[0]["Q"], kv, attention_spec(m).__class__(H, G, D, False, a.scale), q_start=64)
    np.testing.assert_allclose(flat, shifted)


@pytest.mark.parametrize("score_bytes", [2 << 30, 1])
def test_the_torch_references_match_the_numpy_ones(compiled, monkeypatch, score_bytes):
    torch = pytest.importorskip("torch")
    from ovl_runtime._reference.on_gpu import local_references, output_view
    from ovl_runtime.operators.ag_attention import spec as attention_module

    # At 1 byte the torch reference takes one head per step (long sequences' scores do not fit at once).
    monkeypatch.setattr(attention_module, "REFERENCE_SCORE_BYTES", score_bytes)
    for case in ("w2_ring_causal_gqa", "w3_ring_split_mha"):
        m = load_manifest(compiled / case / "manifest.json")
        rng = np.random.default_rng(3)
        rows = m.reference.M // m.world
        inputs = [
            {"Q": rng.standard_normal((rows, m.reference.N)), "KV": rng.standard_normal((m.reference.M, m.reference.K))}
            for _ in range(m.world)
        ]
        want = references(m, inputs)
        got = local_references(m, [{k: torch.from_numpy(v).float() for k, v in x.items()} for x in inputs])
        for r, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-4)
            assert output_view(m, torch.zeros(rows * m.reference.N), r).shape == (rows, m.reference.N)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_the_body_is_persistent_so_the_one_gpu_sm_budget_sizes_its_grid(compiled, case):
    from ovl_runtime._manifest.types import NumSms
    from ovl_runtime._runner.sm_budget import plan_sm_budget

    m = load_manifest(compiled / case / "manifest.json")
    (k,) = m.kernels
    a = attention_spec(m)
    work = -(-(m.reference.M // m.world) // k.constexprs["BLOCK_M"]) * a.heads
    assert len(k.grid) == 1 and isinstance(k.grid[0], NumSms) and k.grid[0].cap == work
    for num_sms in (8, 16, 132):
        b = plan_sm_budget(m.kernels, m.world, num_sms)
        assert b.waits == (True,)
        (programs,) = b.grids[0]
        # Every rank's spinning programs together leave the reserve free for the copies.
        assert 1 <= programs <= min(work, b.per_rank)
        assert b.concurrent_waiting_programs([k.stream]) <= num_sms - b.reserve
