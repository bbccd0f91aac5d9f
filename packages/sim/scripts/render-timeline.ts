// Renders the simulated timeline of MLP-1 AG+GEMM on 8 ranks of the H200 model, the figure
// of docs/simulate.md (docs/timeline-mlp1-w8.svg): an illustration, not a measurement.
// Run from packages/sim: `npx tsx scripts/render-timeline.ts`.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { allGatherSwizzle, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import { MLP_SHAPES, simulate, timelineChart } from "../src/index.js";

const DOCS = join(dirname(fileURLToPath(import.meta.url)), "../docs");

// MLP-1 AG+GEMM at 8 ranks, as `ovl demo` plans it: push-swizzled AllGather, split 1.
const { S, H, I } = MLP_SHAPES["MLP-1"];
const world = 8;
const plan = planSignals(
  allGatherSwizzle({ tensor: { name: "A", shape: [S, H], dtype: "bf16" }, axis: 0, mesh: [world], split: 1, side: "push" }),
);
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
mkdirSync(DOCS, { recursive: true });
writeFileSync(join(DOCS, "timeline-mlp1-w8.svg"), timeline);
console.log(
  `timeline-mlp1-w8.svg: predicted ${sim.latencyMs.toFixed(3)} ms, not overlapped ${sim.nonOverlappedMs.toFixed(3)} ms, bound ${sim.boundMs.toFixed(3)} ms`,
);
