// Renders the world-8 model predictions (no 8-GPU run of this code exists) as a grouped bar
// chart into the repository's evidence tree (results/runs/predictions-w8-2026-11-22/). The
// predictions come from the simulator's accuracy helper (the same case builder the accuracy
// tables use); the measured bars from the GPU run suite-2026-11-22.
// Run from packages/sim: `npx tsx scripts/render-w8.ts`.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { predictWorld } from "../src/simulate/accuracy.test-util.js";
import { latencyBarChart, type LatencyRow } from "../src/charts/index.js";

const HERE = dirname(fileURLToPath(import.meta.url));
const RUNS = join(HERE, "../../../results/runs");
const measured = JSON.parse(readFileSync(join(RUNS, "suite-2026-11-22/w48-ag-run3.json"), "utf8")) as Record<
  string,
  { times: { maxMedian: number } | null }
>;
const rows: LatencyRow[] = [];
for (const p of predictWorld(8)) {
  const name = `mlp${p.mlp}_w8_${p.operator === "AG+GEMM" ? "ag_gemm" : "gemm_rs_ce"}_s${p.split}`;
  rows.push({ case: name, series: "ovl, predicted", ms: p.latencyMs });
  const m = measured[name]?.times?.maxMedian;
  if (m !== undefined) rows.push({ case: name, series: "ovl, measured (suite-2026-11-22)", ms: m });
  rows.push({ case: name, series: "cuBLAS + NCCL, predicted", ms: p.cublasNcclMs });
  rows.push({ case: name, series: "bound (ovl kernels), predicted", ms: p.boundMs });
}
const svg = await latencyBarChart(rows, {
  title: "World 8, H200: model predictions (no 8-GPU run of this code)",
  subtitle: "H200_SXM model; measured bars: AG+GEMM MLP-1/2 of suite-2026-11-22 (in-sample for copyBandwidthUnderCompute)",
  series: ["ovl, predicted", "ovl, measured (suite-2026-11-22)", "cuBLAS + NCCL, predicted", "bound (ovl kernels), predicted"],
  step: 9,
});
writeFileSync(join(RUNS, "predictions-w8-2026-11-22/predictions-w8-2026-11-22.svg"), svg);
console.log(`predictions-w8-2026-11-22.svg: ${rows.length} bars`);
