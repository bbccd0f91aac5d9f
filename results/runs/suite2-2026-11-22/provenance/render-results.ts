// Renders the committed charts of the measured suites (ovl vs baselines, H200, 2026-11-22)
// as latency bar charts, with @ovl/sim's chart builders. Run from packages/bench:
// `npx tsx src/charts/render-results.ts`. (The simulated timeline is @ovl/sim's
// `scripts/render-timeline.ts`.)
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { latencyBarChart, reportLatencyRows, type RunReportLike } from "@ovl/sim";

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
console.log(`latency.svg: ${Object.keys(reports).length} cases; latency-w2.svg, latency-w4.svg`);
