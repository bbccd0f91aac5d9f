"""The stream-K GEMM body, compiled as AllGather+GEMM's consumer at the H100 table's MLP-6 world-8
configuration (8192×3696×8192, 128×256×64, 3 stages, 8 warps), compiles ahead of time for sm_90a
(no GPU needed): tensor-core MMAs, the inserted chunk waits (system-scope acquire loads), the tail's
acquire-release count and its L2-only reads of the partial sums."""

from __future__ import annotations

import builders

SCRIPT = """
const ovl = await import(process.argv[1]);
const { allGatherSwizzle, planSignals } = await import(process.argv[3]);
const { mkdirSync, writeFileSync } = await import("node:fs");
const { join } = await import("node:path");
const out = process.argv[2];
for (const c of JSON.parse(process.argv[4])) {
  const plan = planSignals(allGatherSwizzle({
    tensor: { name: "A", shape: [c.M, c.K], dtype: "bf16" }, axis: 0, mesh: [c.world], split: 1, side: "push",
  }));
  const r = await ovl.compile({
    name: c.name, kind: "ag-gemm", plan, body: ovl.builtinBody("gemm_tma_persistent_streamk"),
    problem: { M: c.M, N: c.N, K: c.K }, tile: { BM: 128, BN: 256, BK: 64 }, groupM: 8,
    options: { dtype: "bf16", numWarps: 8, numStages: 3 },
  });
  const dir = join(out, c.name);
  mkdirSync(dir, { recursive: true });
  for (const f of r.files) writeFileSync(join(dir, f.path), f.text);
  writeFileSync(join(dir, "manifest.json"), ovl.emitManifestJson(r.manifest));
}
"""


def test_the_stream_k_consumer_compiles_for_sm90a(tmp_path_factory):
    cases = [("mlp6_w8", 8, 8192, 3696, 8192)]
    compiled = builders.compile_cases(tmp_path_factory, "streamk_aot", SCRIPT, ["name", "world", "M", "N", "K"], cases)
    got = builders.sm90a_ptx_counts(compiled / "mlp6_w8")
    assert set(got) == {"local-consumer"}, got
    c = got["local-consumer"]
    assert c["wgmma"] > 0 and c["acquire"] > 0, got  # the GEMM and its chunk waits
    assert c["acq_rel"] == 1 and c["cg_loads"] > 0, got  # a tail piece counts itself in, the last reads the partials
