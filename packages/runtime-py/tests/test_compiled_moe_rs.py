"""moe-rs (GroupGEMM + Scatter + TopK-reduce + ReduceScatter, routing on the device) compiled by
@ovl/tlx-emitter's compile() from the built-in moe_gemm_scatter body (per-tile notifies) and the
warp-specialised moe_gemm_scatter_ws (h in block order, one notify per launch): the manifests in both CPU engines
over several launches with fresh random inputs (worlds 2-4, one and two slabs per rank, an expert with
no tokens, every token on one expert, top-k 1-3, fp32/bf16/fp16), a missing notify timing out at its
slab's slot, the replicated weights, the references against the definition, the slab cover, and bad
sizes, manifests and torch inputs refused before any launch."""

from __future__ import annotations

import json
from pathlib import Path

import builders
import numpy as np
import pytest
import torch

from ovl_runtime import emulate, load_manifest
from ovl_runtime._emulate.engine import choose_engine
from ovl_runtime._emulate.interpret_load import interpret_unavailable
from ovl_runtime.errors import ManifestError
from ovl_runtime.operators.ag_moe.routing import draw_routing, moe_align_reference
from ovl_runtime.operators.moe_rs.kernels import check_moe_rs, moe_rs_reference, moe_rs_reference_torch, slab_cover_reference

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
    name: c.name, kind: "moe-rs", plan, body: ovl.builtinBody(c.body),
    problem: { M: c.T, N: c.H, K: c.I }, tile: { BM: c.tile[0], BN: c.tile[1], BK: c.tile[2] },
    moe, options: { dtype: c.dtype },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""

WS = "moe_gemm_scatter_ws"
# name, world, T (tokens), H (hidden = N), I (each rank's intermediate slice = K), split, tile, dtype, E, k, choices, body
COMPILED = [
    # Two slabs per rank, three n-tiles (H not a multiple of BN), every expert drawn.
    ("w2_split2", 2, 32, 40, 24, 2, (16, 16, 16), "fp32", 4, 2, None, "moe_gemm_scatter"),
    # Every token on one expert (top-k 1): one long group covering every slab.
    ("w2_one_expert", 2, 32, 32, 16, 1, (16, 16, 16), "fp32", 4, 1, [2], "moe_gemm_scatter"),
    # Experts 2 and 4 never drawn (no tokens); four ranks, slabs of 6 tokens.
    ("w4_empty_experts", 4, 48, 24, 16, 2, (16, 16, 16), "bf16", 5, 2, [0, 1, 3], "moe_gemm_scatter"),
    # Three ranks, top-k 3, fp16.
    ("w3_top3", 3, 24, 16, 16, 1, (16, 16, 16), "fp16", 3, 3, None, "moe_gemm_scatter"),
    # The warp-specialised body: two slabs per rank, K (24) not a multiple of BLOCK_K, three n-tiles.
    ("ws_w2_split2", 2, 32, 40, 24, 2, (16, 16, 16), "fp32", 4, 2, None, WS),
    # ... every token on one expert; experts without tokens over four ranks; top-k 3 in fp16.
    ("ws_w2_one_expert", 2, 32, 32, 16, 1, (16, 16, 16), "bf16", 4, 1, [2], WS),
    ("ws_w4_empty_experts", 4, 48, 24, 16, 2, (16, 16, 16), "bf16", 5, 2, [0, 1, 3], WS),
    ("ws_w3_top3", 3, 24, 16, 16, 1, (16, 16, 16), "fp16", 3, 3, None, WS),
]
TILE_KINDS = ["moe-align-count", "moe-align-scatter", "moe-slab-expect", "local-producer", "moe-topk-reduce-rs"]
LAUNCH_KINDS = [
    "moe-align-count", "moe-align-scatter", "moe-permute-rows", "moe-slab-expect", "local-producer", "moe-topk-sum",
    "moe-slab-notify", "moe-topk-reduce-rs",
]  # fmt: skip


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    return builders.compile_cases(
        tmp_path_factory,
        "moe_rs",
        SCRIPT,
        ["name", "world", "T", "H", "I", "split", "tile", "dtype", "E", "k", "choices", "body"],
        COMPILED,
    )


def _needs_interpreter() -> None:
    if interpret_unavailable() is not None:
        pytest.skip(str(interpret_unavailable()))


@pytest.mark.parametrize("case", [c[0] for c in COMPILED])
def test_compiled_moe_rs_is_correct_in_the_numpy_engine(compiled, case):
    m = load_manifest(compiled / case / "manifest.json")
    assert m.reference.operator == "moe-rs"
    kinds = [k.template_kind for k in m.kernels]
    assert kinds == (LAUNCH_KINDS if case.startswith("ws_") else TILE_KINDS)
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
    from ovl_runtime._emulate.engine import EmulatedWorld

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


# ---- references and sizes ----


CASES = [
    # world, T, k, E, I, H, choices
    (2, 32, 2, 4, 24, 40, None),
    (2, 32, 1, 4, 16, 32, [2]),  # every token on one expert
    (4, 48, 2, 5, 16, 24, [0, 1, 3]),  # experts 2 and 4 without tokens
]


def _inputs(rng, world, T, k, E, inter, H, choices):
    ids = draw_routing(rng, T, k, E, choices)
    wts = rng.random((T, k)).astype(np.float32)
    h = [rng.standard_normal((T * k, inter)).astype(np.float32) for _ in range(world)]
    w2 = [(rng.standard_normal((E, inter, H)) / np.sqrt(inter)).astype(np.float32) for _ in range(world)]
    return ids, wts, h, w2


@pytest.mark.parametrize(("world", "T", "k", "E", "inter", "H", "choices"), CASES)
def test_the_numpy_and_torch_references_agree_with_the_definition(world, T, k, E, inter, H, choices):
    from ovl_runtime.operators.moe_rs.reference import moe_rs_partial
    from ovl_runtime.operators.moe_rs.torch_reference import moe_rs_partial as torch_partial

    ids, wts, h, w2 = _inputs(np.random.default_rng(), world, T, k, E, inter, H, choices)
    total = np.zeros((T, H))
    for r in range(world):
        for t in range(T):
            for j in range(k):
                total[t] += wts[t, j] * (h[r][t * k + j].astype(np.float64) @ w2[r][ids[t, j]].astype(np.float64))
    per = T // world
    want = [total[r * per : (r + 1) * per] for r in range(world)]
    got = moe_rs_reference(h, w2, ids, wts)
    tref = moe_rs_reference_torch(
        torch.from_numpy(np.stack(h)), torch.from_numpy(np.stack(w2)), torch.from_numpy(ids), torch.from_numpy(wts)
    )
    parts = sum(moe_rs_partial(h[r], w2[r], ids, wts) for r in range(world))
    tparts = sum(
        torch_partial(torch.from_numpy(h[r]), torch.from_numpy(w2[r]), torch.from_numpy(ids), torch.from_numpy(wts), T, inter, H)
        for r in range(world)
    )
    for r in range(world):
        np.testing.assert_allclose(got[r], want[r], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(tref[r].numpy(), want[r], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(parts, total, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tparts.numpy(), total, rtol=1e-4, atol=1e-4)


def test_slab_cover_counts_the_blocks_whose_tokens_reach_each_slab():
    rng = np.random.default_rng()
    T, k, E, slab_t, bm = 64, 2, 6, 8, 16
    ids = draw_routing(rng, T, k, E, [0, 4, 5])
    sorted_ids, _, blocks = moe_align_reference(ids, E, bm)
    cover = slab_cover_reference(sorted_ids, blocks, bm, k, slab_t, T // slab_t)
    want = np.zeros(T // slab_t, dtype=np.int64)
    for b in range(blocks):
        e = sorted_ids[b * bm : (b + 1) * bm]
        toks = e[e < T * k] // k
        for s in range(T // slab_t):
            want[s] += int(toks.min() // slab_t <= s <= toks.max() // slab_t)
    np.testing.assert_array_equal(cover, want)
    assert cover.min() >= 1


def test_bad_sizes_are_refused_before_any_launch():
    with pytest.raises(ValueError, match="top-k \\(3\\) exceeds"):
        check_moe_rs(16, 3, 2, 8, 8, 2)
    with pytest.raises(ValueError, match="divide evenly over the world"):
        check_moe_rs(30, 2, 4, 8, 8, 4)
    with pytest.raises(ValueError, match="positive divisor of T/W = 8"):
        check_moe_rs(16, 2, 4, 8, 8, 2, slab_t=3)


def test_the_torch_api_refuses_bad_input_before_any_launch():
    from ovl_runtime.errors import UsageError
    from ovl_runtime.groups import OneGpuGroup
    from ovl_runtime.ops import moe_grouped_matmul_reduce_scatter

    g = OneGpuGroup(2)
    h, w = torch.zeros((2, 32, 8), dtype=torch.bfloat16), torch.zeros((2, 4, 8, 16), dtype=torch.bfloat16)
    ids, wts = torch.zeros((2, 16, 2), dtype=torch.int32), torch.zeros((2, 16, 2))
    with pytest.raises(UsageError, match="CUDA"):
        moe_grouped_matmul_reduce_scatter(h, ids, wts, w, g)
    with pytest.raises(UsageError, match="takes torch.bfloat16"):
        moe_grouped_matmul_reduce_scatter(h.float(), ids, wts, w.float(), g)


def test_library_keys_name_the_routing_and_refuse_a_manifest_of_another(compiled, tmp_path):
    from ovl_runtime._kernels.library import KernelKey, check_manifest
    from ovl_runtime.errors import UsageError

    key = KernelKey("moe-rs", 4, 48, 24, 16, "bf16", experts=5, topk=2)
    assert key.backend == "sm" and key.split == 2
    assert key.dirname == "moe-rs-sm-w4-m48-n24-k16-e5-top2-bf16"
    assert key.cli_args(tmp_path) == [
        "emit", "moe-rs", "--m", "48", "--n", "24", "--k", "16", "--world", "4", "--split", "2", "--dtype", "bf16",
        "--experts", "5", "--topk", "2", "--out", str(tmp_path),
    ]  # fmt: skip
    assert KernelKey("moe-rs", 4, 36, 24, 16, "bf16", experts=5, topk=2).split == 1  # 9 tokens a rank
    m = load_manifest(compiled / "w4_empty_experts" / "manifest.json")
    check_manifest(m, key, tmp_path)
    with pytest.raises(ManifestError, match="experts 5 \\(wanted 6\\)"):
        check_manifest(m, KernelKey("moe-rs", 4, 48, 24, 16, "bf16", experts=6, topk=2), tmp_path)
    with pytest.raises(UsageError, match="moe-rs: needs 1 <= topk <= experts"):
        KernelKey("moe-rs", 2, 64, 64, 32, "bf16", experts=2, topk=3)


def test_a_key_compiled_by_the_cli_runs_in_the_numpy_engine(tmp_path, monkeypatch):
    import shutil
    import subprocess

    from ovl_runtime._kernels.library import KernelKey, check_manifest, compile_key

    cli = Path(__file__).resolve().parents[2] / "cli" / "dist" / "bin.js"
    node = shutil.which("node")
    if node is None or not cli.exists():
        pytest.skip("needs node and the built CLI")
    probe = subprocess.run([node, str(cli), "emit", "moe-rs", "--help"], capture_output=True, text=True, timeout=120)
    if "unknown operator" in probe.stdout + probe.stderr:
        pytest.skip("this CLI build has no `ovl emit moe-rs`")
    monkeypatch.setenv("OVL_CLI", f"{node} {cli}")
    key = KernelKey("moe-rs", 2, 64, 32, 32, "bf16", experts=4, topk=2)
    path = compile_key(key, tmp_path, progress=False)
    m = load_manifest(path)
    check_manifest(m, key, path)
    out = emulate(m, epochs=2, seed=1, engine="numpy")
    out.raise_for_failure()
    assert len(out.checks) == 2 and all(c.ok for c in out.checks)
