// Predicts, on 2×8 and 4×8 H200 (400 Gb/s per GPU between nodes), AllGather+GEMM, GEMM+
// ReduceScatter, the MLP layer and the MoE layer, overlapped (the tuner's best two-level plan)
// against not overlapped (GEMM, then the NCCL-like collective on the same fabric), and writes
// predictions.md, predictions.json and layers.svg to an output folder. Model predictions only.
// Run from packages/sim: `npx tsx scripts/predict-multinode.ts [out-dir]`
// (default: <repo>/results/runs/predictions-multinode-2026-12-01).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { H200_SXM_2x8, H200_SXM_4x8, MULTI_NODE_TUNE_SPACE, multiNodeChart, multiNodeMarkdown, predictMultiNode } from "../src/index.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(HERE, "../../../results/runs/predictions-multinode-2026-12-01"));
mkdirSync(out, { recursive: true });

const started = performance.now();
const rows = predictMultiNode({
  hardware: [H200_SXM_2x8, H200_SXM_4x8],
  onRow: (r) =>
    process.stderr.write(`${r.hardware} ${r.operator} ${r.shape}: ${r.overlappedMs.toFixed(3)} vs ${r.notOverlappedMs.toFixed(3)} ms\n`),
});
const models = [H200_SXM_2x8, H200_SXM_4x8].map((hw) => ({
  name: hw.name,
  topology: hw.topology,
  source: { topology: hw.source.topology, network: hw.source.network },
}));
writeFileSync(
  join(out, "predictions.json"),
  `${JSON.stringify({ kind: "prediction (model, not measured)", command: "npx tsx packages/sim/scripts/predict-multinode.ts", models, space: MULTI_NODE_TUNE_SPACE, rows }, null, 2)}\n`,
);
writeFileSync(join(out, "predictions.md"), `# Multi-node predictions (model, not measured)\n\n${multiNodeMarkdown(rows)}`);
writeFileSync(join(out, "layers.svg"), await multiNodeChart(rows));
process.stderr.write(`${rows.length} rows in ${((performance.now() - started) / 1e3).toFixed(1)} s → ${out}\n`);
