// Renders the committed charts: the measured suite (ovl vs baselines, H200, 2026-11-22)
// as a latency bar chart, and the simulated timeline of MLP-1 AG+GEMM on 8 ranks of the
// H200 model. Run from packages/bench: `npx tsx src/charts/render-results.ts`.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { allGatherSwizzle, lowerToTileSchedule, planSignals, simulate } from "@ovl/chunk-plan";
import { MLP_SHAPES } from "../shapes.js";
import { latencyBarChart } from "./latency.js";
import { reportLatencyRows, type RunReportLike } from "./report-rows.js";
import { timelineChart } from "./timeline.js";

const RESULTS = join(dirname(fileURLToPath(import.meta.url)), "../../results");
const SUITE = join(RESULTS, "gpu/suite-2026-11-22");

const reports: Record<string, RunReportLike> = {};
for (const file of ["w2-run1.json", "w48-ag-run3.json", "w2-rs-run5.json"]) {
  Object.assign(reports, JSON.parse(readFileSync(join(SUITE, file), "utf8")) as Record<string, RunReportLike>);
}
const latency = await latencyBarChart(reportLatencyRows(reports), {
  title: "ovl's emitted kernels vs baselines, NVIDIA H200, bf16 (2026-11-22)",
  subtitle: "median of 30 launches, max over ranks; baselines measured in the same process; failed cases left out",
  series: ["ovl", "not overlapped (cuBLAS + NCCL)", "PyTorch async-TP", "GEMM alone (cuBLAS)"],
});
writeFileSync(join(SUITE, "latency.svg"), latency);

// The second suite (4×H200, worlds 2 and 4, MLP-1…6, the committed kernels): one chart per world.
const SUITE2 = join(RESULTS, "gpu/suite2-2026-11-22");
for (const world of [2, 4]) {
  const run = JSON.parse(readFileSync(join(SUITE2, `x2-w${world}.json`), "utf8")) as Record<string, RunReportLike>;
  // The SM backend with 8 SMs is left out of the picture (it is in the tables): 16 SMs is its better setting.
  const shown = Object.fromEntries(Object.entries(run).filter(([name]) => !/_gemm_rs_sm_s/.test(name)));
  const svg = await latencyBarChart(reportLatencyRows(shown), {
    title: `ovl's emitted kernels vs baselines, ${world}×H200, bf16, MLP-1…6 (2026-11-22)`,
    subtitle: "median of 30 launches, max over ranks; baselines measured in the same process",
    series: ["ovl", "not overlapped (cuBLAS + NCCL)", "PyTorch async-TP", "GEMM alone (cuBLAS)"],
    step: 9,
  });
  writeFileSync(join(SUITE2, `latency-w${world}.svg`), svg);
}

// MLP-1 AG+GEMM at 8 ranks, as `ovl demo` plans it: push-swizzled AllGather, split 1.
const { S, H, I } = MLP_SHAPES["MLP-1"];
const world = 8;
const plan = planSignals(allGatherSwizzle({ tensor: { name: "A", shape: [S, H], dtype: "bf16" }, axis: 0, mesh: [world], split: 1, side: "push" }));
const schedule = lowerToTileSchedule(plan, {
  tensor: "A",
  problem: { M: S, N: I / world, K: H },
  tile: { BM: 128, BN: 256, BK: 64 },
  persistent: { numSms: 132 },
  groupSizeM: 8,
});
const sim = simulate(plan, schedule, { hardware: "H200_SXM" });
const timeline = await timelineChart(sim, {
  title: `MLP-1 AllGather+GEMM, 8 ranks, H200_SXM model, copy engine, split 1 (simulated)`,
});
mkdirSync(join(RESULTS, "sim"), { recursive: true });
writeFileSync(join(RESULTS, "sim/timeline-mlp1-w8.svg"), timeline);
console.log(`latency.svg: ${Object.keys(reports).length} cases; timeline: predicted ${sim.latencyMs.toFixed(3)} ms, not overlapped ${sim.nonOverlappedMs.toFixed(3)} ms, bound ${sim.boundMs.toFixed(3)} ms`);
