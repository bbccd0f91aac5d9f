"""MoE with routing computed on the device (ag-moe: AllGather + Gather + grouped GEMM), compiled
from ovl's built-in bodies (the persistent moe_gather_gemm and the non-persistent default
moe_gather_gemm_blocks) by @ovl/tlx-emitter's compile(): the routing kernels
(ovl_runtime.moe_align) against their numpy reference, the emitted manifests under both CPU
engines with a fresh random routing per checked launch (worlds 2 and 3, split 1 and 2, ring
and swizzle plans, an expert without tokens, every token on one expert, top-k 1 and 2, tokens
not divisible by the world), the reference, and the refusals of bad routings and manifests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import builders
import numpy as np
import pytest

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.engine import choose_engine
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime._reference.on_cpu import references
from ovl_runtime.errors import ManifestError
from ovl_runtime.operators.ag_moe.reference import moe_matmul
from ovl_runtime.operators.ag_moe.routing import check_sizes, draw_routing, moe_align_reference

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherRing, allGatherSwizzle, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const o = { tensor: { name: "X", shape: [c.T, c.H], dtype: c.dtype }, axis: 0, mesh: [c.world], split: c.split, side: "push" };
  const plan = planSignals(c.ring ? allGatherRing(o) : allGatherSwizzle(o));
  const moe = c.choices === null ? { experts: c.E, topk: c.k } : { experts: c.E, topk: c.k, choices: c.choices };
  const r = await ovl.compile({
    name: c.name, kind: "ag-moe", plan, body: ovl.builtinBody(c.body),
    problem: { M: c.T, N: c.I, K: c.H }, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] },
    moe, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

P, B = "moe_gather_gemm", "moe_gather_gemm_blocks"  # the persistent built-in body, the non-persistent default
# name, world, T (tokens), H (hidden = K), I (intermediate = N), split, tile, dtype, ring, E, k, choices, body
CASES = [
    # 100 tokens over 3 ranks (34/33/33), chunks off block boundaries, every expert drawn.
    ("w3_ragged_ring_split", 3, 100, 32, 32, 2, (16, 32, 32), "fp32", True, 4, 2, None, P),
    # Expert 1 never drawn (no tokens), top-k 1, swizzle.
    ("w2_empty_expert_top1", 2, 64, 32, 64, 1, (16, 32, 32), "bf16", False, 4, 1, [0, 2, 3], P),
    # Every token on one expert (top-k 1): one long group.
    ("w2_one_expert_split", 2, 96, 64, 32, 2, (32, 32, 32), "fp16", False, 8, 1, [5], P),
    # Top-k 2 on two experts only: both take every token; 3 ranks, uneven (43/43/42).
    ("w3_two_experts_top2", 3, 128, 32, 32, 1, (32, 32, 32), "bf16", True, 6, 2, [1, 4], P),
    # More slots than one routing program's chunk: two programs per routing kernel.
    ("w2_two_programs", 2, 192, 32, 32, 2, (16, 32, 32), "fp32", True, 8, 2, None, P),
    # The non-persistent body (programs past the valid blocks return before their tile; a block's slots
    # read as one vector, the loop of waits only when one is short): ragged shards, an expert without
    # tokens with two n-blocks, every token on one expert.
    ("w3_ragged_ring_split_blocks", 3, 100, 32, 32, 2, (16, 32, 32), "fp32", True, 4, 2, None, B),
    ("w2_empty_expert_top1_blocks", 2, 64, 32, 64, 1, (16, 32, 32), "bf16", False, 4, 1, [0, 2, 3], B),
    ("w2_one_expert_split_blocks", 2, 96, 64, 32, 2, (32, 32, 32), "fp16", False, 8, 1, [5], B),
]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory,
        "moe",
        SCRIPT,
        ["name", "world", "T", "H", "I", "split", "tile", "dtype", "ring", "E", "k", "choices", "body"],
        CASES,
    )


# ---- the routing tables ----


@pytest.mark.parametrize(
    "tokens,k,experts,block_m,choices",
    [(37, 2, 5, 16, [0, 1, 3]), (64, 1, 4, 32, [2]), (5, 2, 2, 64, None), (200, 2, 8, 16, None), (1, 1, 1, 16, None)],
)
def test_the_numpy_tables_group_every_slot_by_expert_in_blocks(tokens, k, experts, block_m, choices):
    ids = draw_routing(np.random.default_rng(tokens), tokens, k, experts, choices)
    sorted_ids, expert_of_block, blocks = moe_align_reference(ids, experts, block_m)
    sizes = check_sizes(tokens, k, experts, block_m)
    assert sorted_ids.shape == (sizes.padded,) and expert_of_block.shape == (sizes.max_blocks,)
    valid = sorted_ids[sorted_ids < tokens * k]
    assert sorted(valid.tolist()) == list(range(tokens * k))  # every slot exactly once
    assert (sorted_ids[blocks * block_m :] == tokens * k).all() and (expert_of_block[blocks:] == -1).all()
    for b in range(blocks):
        entries = sorted_ids[b * block_m : (b + 1) * block_m]
        real = entries[entries < tokens * k]
        assert real.size > 0 and entries[0] == real[0]  # padding only at a block's end
        assert (ids.reshape(-1)[real] == expert_of_block[b]).all()
        assert (np.diff(real) > 0).all()  # tokens ascending within a block
    assert (np.diff(expert_of_block[:blocks]) >= 0).all()


def test_bad_routing_sizes_are_refused():
    with pytest.raises(ValueError, match="top-k \\(3\\) exceeds the number of experts \\(2\\)"):
        check_sizes(8, 3, 2, 16)
    with pytest.raises(ValueError, match="power of two"):
        check_sizes(8, 1, 2, 24)
    with pytest.raises(ValueError, match="cannot be drawn from 1 choices"):
        draw_routing(np.random.default_rng(0), 4, 2, 4, [3])


def test_moe_matmul_multiplies_each_slot_by_its_expert():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((6, 4)), rng.standard_normal((3, 4, 5))
    ids = np.array([[0, 2], [1, 0], [2, 1], [2, 0], [0, 1], [1, 2]])
    want = np.stack([x[t] @ w[ids[t, j]] for t in range(6) for j in range(2)])
    np.testing.assert_allclose(moe_matmul(x, w, ids), want, rtol=1e-12)


# ---- compiled operators ----


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_moe_operators_are_correct_running_their_own_source(compiled, case):
    if interpret_unavailable() is not None:
        pytest.skip(str(interpret_unavailable()))
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "ag-moe" and choose_engine(m, "auto") == "interpret"
    assert [k.template_kind for k in m.kernels] == ["moe-align-count", "moe-align-scatter", "local-consumer"]
    out = emulate(m, epochs=2, seed=11, engine="interpret")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


@pytest.mark.parametrize("case", [c[0] for c in CASES])
def test_moe_operators_are_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    out = emulate(m, epochs=2, seed=3, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)


def test_the_non_persistent_body_reads_its_slots_as_one_vector_then_loops_only_when_short(compiled):
    src = (compiled / "w3_ragged_ring_split_blocks" / "w3_ragged_ring_split_blocks.py").read_text()
    assert "ld_acquire_sys" in src.splitlines()[5]  # the import line
    fast, slow = src.index("ovl_short = tl.min(ovl_seen, axis=0)"), src.index("for ovl_seg in range(")
    assert fast < src.index("if ovl_short < 0:") < slow < src.index("pid_m = consume_token(pid_m, ovl_short)")
    # Programs past the valid blocks return before the tile statement, so before any wait.
    assert src.index("return") < src.index("# ovl: tile m=pid_m") < fast


def test_the_emitted_body_waits_on_the_segments_of_its_rows(compiled):
    src = (compiled / "w3_ragged_ring_split" / "w3_ragged_ring_split.py").read_text()
    assert "ovl_ids = tl.load(sorted_token_ids + ovl_mb * 16 + tl.arange(0, 16))" in src
    assert "for ovl_seg in range(" in src and "pid_m = consume_token(pid_m, ovl_tok)" in src
    routing = (compiled / "w3_ragged_ring_split" / "w3_ragged_ring_split_routing.py").read_text()
    assert "from ovl_runtime.moe_align import moe_align_count, moe_align_scatter" in routing


def _edited(compiled: Path, tmp_path: Path, case: str, edit) -> Path:
    d = json.loads((compiled / case / "manifest.json").read_text())
    edit(d)
    for k in d["kernels"]:
        (tmp_path / k["source"]).write_text((compiled / case / k["source"]).read_text())
    (tmp_path / "m.json").write_text(json.dumps(d))
    return tmp_path / "m.json"


def _buffer(d: dict, name: str) -> dict:
    return next(b for b in d["buffers"] if b["name"] == name)


@pytest.mark.parametrize("case", ["w3_ragged_ring_split", "w3_ragged_ring_split_blocks"])
def test_a_wait_on_a_slot_no_chunk_signals_times_out(compiled, tmp_path, case):
    # Point every segment's wait at a slot nobody writes: the body must not compute without it (the
    # non-persistent body's vector read finds the slot short and falls to the loop of bounded waits).
    if interpret_unavailable() is not None:
        pytest.skip(str(interpret_unavailable()))

    def edit(d):
        # The segments' wait slots print inline (none on the rank's own rows): every copy signals a
        # slot no segment waits on instead.
        d["waitTimeoutNs"] = 300_000_000
        unwritten = d["signals"]["slots"]
        moved = 0
        for rank in d["hostOps"]:
            for stream in rank["streams"]:
                for op in stream["ops"]:
                    if op.get("signal") is not None:
                        op["signal"]["slot"] = unwritten
                        moved += 1
        d["signals"]["slots"] += 1
        _buffer(d, "signals")["shape"] = [d["signals"]["slots"]]
        assert moved > 0

    m = load_manifest(_edited(compiled, tmp_path, case, edit))
    out = emulate(m, epochs=1, seed=2, engine="interpret")
    assert out.failures


@pytest.mark.parametrize(
    "fault,message",
    [
        ("init-without-routing", 'init "routing" exactly when'),
        ("choices-out-of-range", "choices must be distinct experts"),
        ("too-few-choices", "distinct experts but only 1"),
        ("experts-mismatch", "routes to 5 experts, but B holds 4"),
        ("missing-topk", "needs inputs A \\(tokens\\)"),
    ],
)
def test_bad_moe_manifests_are_refused_when_loaded(compiled, tmp_path, fault, message):
    def edit(d):
        topk = _buffer(d, d["reference"]["inputs"]["topk"])
        if fault == "init-without-routing":
            del topk["routing"]
        elif fault == "choices-out-of-range":
            topk["routing"]["choices"] = [0, 4]
        elif fault == "too-few-choices":
            topk["routing"]["choices"] = [1]
        elif fault == "experts-mismatch":
            topk["routing"]["experts"] = 5
        else:
            del d["reference"]["inputs"]["topk"]

    with pytest.raises(ManifestError, match=message):
        load_manifest(_edited(compiled, tmp_path, "w3_ragged_ring_split", edit))


def test_the_reference_gathers_the_shards_and_routes_each_slot(compiled):
    m = load_manifest(compiled / "w3_two_experts_top2" / "manifest.json")
    rng = np.random.default_rng(0)
    T, H, inter, E = 128, 32, 32, 6
    counts = [43, 43, 42]
    ids = draw_routing(rng, T, 2, E, [1, 4])
    xs = [rng.standard_normal((c, H)) for c in counts]
    inputs = [{"A": xs[r], "B": rng.standard_normal((E, H, inter)), "topk": ids} for r in range(3)]
    full = np.concatenate(xs)
    got = references(m, inputs)
    for r in range(3):
        want = np.stack([full[t] @ inputs[r]["B"][ids[t, j]] for t in range(T) for j in range(2)])
        np.testing.assert_allclose(got[r], want, rtol=1e-9, atol=1e-12)
    torch = pytest.importorskip("torch")
    from ovl_runtime._reference.on_gpu import local_references

    t = local_references(m, [{k: torch.from_numpy(v) for k, v in x.items()} for x in inputs])
    for r in range(3):
        np.testing.assert_allclose(t[r].double().numpy(), got[r], rtol=1e-4, atol=1e-3)
    # The GPU runner reads a rank's output buffer (one row per token slot) as the numpy engine does.
    from ovl_runtime._reference.on_cpu import output_view
    from ovl_runtime._reference.on_gpu import output_view as torch_output_view

    out = rng.standard_normal(T * 2 * inter)
    np.testing.assert_array_equal(torch_output_view(m, torch.from_numpy(out), 1).numpy(), output_view(m, out, 1))
    assert tuple(torch_output_view(m, torch.from_numpy(out), 1).shape) == (T * 2, inter)


@pytest.mark.skipif(interpret_unavailable() is not None, reason=str(interpret_unavailable()))
def test_the_routing_kernels_match_the_numpy_tables():
    # In a process of its own: the kernels run under Triton's interpreter, which must be on
    # before triton is first imported.
    code = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
from ovl_runtime.operators.ag_moe.routing import draw_routing, moe_align_reference
from ovl_runtime.operators.ag_moe.routing_kernels import moe_align_block_size
rng = np.random.default_rng(7)
for T, k, E, bm, choices, programs in [(64, 2, 4, 32, None, 4), (100, 1, 8, 16, [3], 3), (300, 2, 8, 64, [1, 5], 5), (37, 2, 5, 32, [0, 1, 2, 4], 7), (1, 1, 1, 16, None, 2)]:
    ids = draw_routing(rng, T, k, E, choices)
    s, e, n = moe_align_block_size(torch.from_numpy(ids), E, bm, programs=programs)
    rs, re_, rn = moe_align_reference(ids, E, bm)
    assert int(n[0]) == rn and int(n[1]) == 0, (T, int(n[0]), rn)
    np.testing.assert_array_equal(s.numpy(), rs)
    np.testing.assert_array_equal(e.numpy(), re_)
bad = torch.tensor([[0, 9], [1, -1]], dtype=torch.int32)
s, e, n = moe_align_block_size(bad, 4, 16, programs=2)
assert int(n[1]) == 2 and int(n[0]) == 2  # ids outside [0, E) are counted and dropped
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_library_keys_name_the_routing_and_refuse_a_manifest_of_another(compiled, tmp_path):
    from ovl_runtime._kernels.library import KernelKey, check_manifest
    from ovl_runtime.errors import UsageError

    key = KernelKey("ag-moe", 2, 64, 64, 32, "bf16", experts=4, topk=1)
    assert key.dirname == "ag-moe-w2-m64-n64-k32-e4-top1-bf16"
    assert key.cli_args(tmp_path)[-6:-2] == ["--experts", "4", "--topk", "1"]
    m = load_manifest(compiled / "w2_empty_expert_top1" / "manifest.json")
    check_manifest(m, key, tmp_path)
    with pytest.raises(ManifestError, match="topk 1 \\(wanted 2\\)"):
        check_manifest(m, KernelKey("ag-moe", 2, 64, 64, 32, "bf16", experts=4, topk=2), tmp_path)
    with pytest.raises(UsageError, match="1 <= topk <= experts"):
        KernelKey("ag-moe", 2, 64, 64, 32, "bf16", experts=2, topk=3)
    with pytest.raises(UsageError, match="takes no experts"):
        KernelKey("ag-gemm", 2, 64, 64, 32, "bf16", experts=2)
