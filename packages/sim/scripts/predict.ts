// `pnpm -F @ovl/sim predict [--out <dir>]`: predicts every operator over its suite at worlds
// 2/4/8 on H100 and H200 and writes the run results/runs/predictions-<date>/: the rows
// (predictions-<date>.{json,md}), a chart per operator family and hardware model at world 8
// (predictions-<date>-w8-<family>-<hardware>.svg) and its run.json (ovl.run/v1).
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ATTENTION_SOURCE, MOE_RS_SOURCE, MOE_SOURCE } from "../src/index.js";
import { predictionRows } from "./predict/predictions.js";
import { PREDICTION_FAMILIES, predictionsChart, predictionsJson, predictionsMarkdown, predictionsRun } from "./predict/report.js";
import { PREDICTION_HARDWARE } from "./predict/suites.js";

const args = process.argv.slice(2);
const outIdx = args.indexOf("--out");
const date = new Date().toISOString().slice(0, 10);
const RUNS = join(dirname(fileURLToPath(import.meta.url)), "../../../results/runs");
const dir = outIdx >= 0 && args[outIdx + 1] !== undefined ? args[outIdx + 1]! : join(RUNS, `predictions-${date}`);
const rows = predictionRows({
  onRow: (r) =>
    process.stdout.write(
      `${r.hardware} w${r.world} ${r.operator} ${r.shape}: overlapped ${r.overlappedMs.toFixed(3)} ms, not overlapped ${r.nonOverlappedMs.toFixed(3)} ms, speedup ${r.speedup.toFixed(2)}, ${r.bound}-bound\n`,
    ),
});
const sources = [
  "GEMM, copy engine, signals, collectives: the hardware models `H100_SXM` / `H200_SXM` of @ovl/sim (their `source` fields).",
  `attention body: ${ATTENTION_SOURCE} (one H100; efficiency relative to the model's GEMM rate, reused on H200).`,
  `MoE body: ${MOE_SOURCE.join(", ")} (one H100; likewise reused on H200), each shape at the tile and launch its tuned table's ag-moe entry gives.`,
  `moe-rs producers: ${MOE_RS_SOURCE} (one H100; likewise reused on H200); the owners' pulls from the NVLink port and the rs-reduce calibration. moe-rs as emitted by default is signalled once per launch, so its pulls follow its producer: its "speedup" is about 1 by construction (fused, not overlapped; \`predictMoeRs\` with notifies "tile" prices the per-tile variant).`,
];
mkdirSync(dir, { recursive: true });
const base = join(dir, `predictions-${date}`);
writeFileSync(`${base}.json`, predictionsJson(rows, date));
writeFileSync(`${base}.md`, predictionsMarkdown(rows, date, sources));
writeFileSync(join(dir, "run.json"), predictionsRun(rows, date));
const families = Object.keys(PREDICTION_FAMILIES) as (keyof typeof PREDICTION_FAMILIES)[];
for (const hw of PREDICTION_HARDWARE) {
  for (const f of families) writeFileSync(`${base}-w8-${f}-${hw}.svg`, await predictionsChart(rows, f, 8, hw));
}
console.error(`predict: ${rows.length} cases → ${base}.{json,md} and ${PREDICTION_HARDWARE.length * families.length} charts`);
