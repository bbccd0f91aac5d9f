// The prediction suite's files: JSON of every row, a markdown table per operator, and a bar
// chart of overlapped against non-overlapped time (@ovl/sim's latency chart).
import { latencyBarChart, type LatencyRow } from "../../src/index.js";
import type { PredictionRow } from "./predictions.js";

/** Version tag of the predictions file. */
export const PREDICTIONS_SCHEMA = "ovl.predictions/v1" as const;

const fmt = (ms: number): string => (ms >= 100 ? ms.toFixed(1) : ms >= 1 ? ms.toFixed(3) : ms.toFixed(4));

/** The JSON document: schema, date and rows. */
export function predictionsJson(rows: readonly PredictionRow[], date: string): string {
  return `${JSON.stringify({ $schema: PREDICTIONS_SCHEMA, date, rows }, null, 1)}\n`;
}

/** The markdown report: one table per operator, rows by shape, world and hardware, and a summary. */
export function predictionsMarkdown(rows: readonly PredictionRow[], date: string, sources: readonly string[]): string {
  const lines = [
    `# Simulator predictions — ${date}`,
    "",
    "Predicted by `@ovl/sim`'s operator models (`pnpm -F @ovl/sim predict`). Per operator, shape,",
    "world and hardware model: the overlapped operator, the compute body alone, the communication",
    "alone, the two in sequence (non-overlapped), the predicted speedup (non-overlapped ÷",
    "overlapped; below 1 the overlapped operator is predicted to lose) and the resource that bounds",
    "it (the larger of compute alone and communication alone). All times in ms on the slowest rank.",
    "Calibration sources:",
    "",
    ...sources.map((s) => `- ${s}`),
    "",
  ];
  const operators = [...new Set(rows.map((r) => r.operator))];
  for (const op of operators) {
    lines.push(`## ${op}`, "", "| shape | world | hardware | overlapped | compute | comm | non-overlapped | speedup | bound |");
    lines.push("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |");
    const mine = rows
      .filter((r) => r.operator === op)
      .sort((a, b) => a.shape.localeCompare(b.shape, "en", { numeric: true }) || a.world - b.world || a.hardware.localeCompare(b.hardware));
    for (const r of mine) {
      lines.push(
        `| ${r.shape} | ${r.world} | ${r.hardware} | ${fmt(r.overlappedMs)} | ${fmt(r.computeMs)} | ${fmt(r.commMs)} | ${fmt(r.nonOverlappedMs)} | ${r.speedup.toFixed(2)} | ${r.bound} |`,
      );
    }
    const s = speedups(mine);
    lines.push(
      "",
      `Geometric-mean predicted speedup ${s.geo} (min ${s.min}, max ${s.max}); ${mine.filter((r) => r.speedup < 1).length} of ${mine.length} cases predicted to lose.`,
      "",
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Geometric mean, minimum and maximum predicted speedup of `rows`, as the report prints them. */
function speedups(rows: readonly PredictionRow[]): { geo: string; min: string; max: string } {
  const sp = rows.map((r) => r.speedup);
  const geo = Math.exp(sp.reduce((a, s) => a + Math.log(s), 0) / sp.length);
  return { geo: geo.toFixed(2), min: Math.min(...sp).toFixed(2), max: Math.max(...sp).toFixed(2) };
}

/**
 * The run's metadata (ovl.run/v1, validated by @ovl/bench's results index): a simulated run on
 * the CPU whose headline is the report's own AG+GEMM summary, so every figure in it is one the
 * markdown prints.
 */
export function predictionsRun(rows: readonly PredictionRow[], date: string): string {
  const ag = rows.filter((r) => r.operator === "ag-gemm");
  const s = speedups(ag.length > 0 ? ag : rows);
  const run = {
    $schema: "ovl.run/v1",
    date,
    device: "CPU",
    // The index's operator names: the tile-wise GEMM+AR and causal attention are variants of theirs.
    operators: [...new Set(rows.map((r) => r.operator.replace(/-(tilewise|causal)$/, "")))],
    worlds: [...new Set(rows.map((r) => r.world))].sort((a, b) => a - b),
    mode: "simulated",
    headline: `Simulated, not measured: ${ag.length > 0 ? "ag-gemm" : "all operators"} geometric-mean predicted speedup ${s.geo} (min ${s.min}, max ${s.max}) over MLP-1…6 at worlds 2/4/8 on the H100 and H200 models.`,
    decided:
      "Nothing by itself: what the multi-GPU runs should expect from @ovl/sim's operator models at this commit, to compare a measurement with.",
    provenance: ["pnpm -F @ovl/sim predict (packages/sim/scripts/predict.ts)"],
  };
  return `${JSON.stringify(run, null, 2)}\n`;
}

/** Chart families: cases whose times are of one order, so one linear axis shows them all. */
export const PREDICTION_FAMILIES = {
  mlp: ["ag-gemm", "gemm-rs", "gemm-ar", "gemm-ar-tilewise", "a2a-gemm"],
  moe: ["ag-moe", "moe-rs"],
  attention: ["ag-attention", "ag-attention-causal"],
} as const;

/** The chart: overlapped and non-overlapped time of every case of one family at one world and hardware. */
export function predictionsChart(
  rows: readonly PredictionRow[],
  family: keyof typeof PREDICTION_FAMILIES,
  world: number,
  hardware: string,
): Promise<string> {
  const ops: readonly string[] = PREDICTION_FAMILIES[family];
  const bars: LatencyRow[] = [];
  for (const r of rows.filter((x) => x.world === world && x.hardware === hardware && ops.includes(x.operator))) {
    const name = `${r.operator} ${r.shape}`;
    bars.push({ case: name, series: "ovl (predicted)", ms: r.overlappedMs });
    bars.push({ case: name, series: "not overlapped (predicted)", ms: r.nonOverlappedMs });
  }
  return latencyBarChart(bars, {
    title: `Predicted latency (${family}), world ${world}, ${hardware}`,
    subtitle: "@ovl/sim operator models: overlapped vs compute + communication in sequence",
    series: ["ovl (predicted)", "not overlapped (predicted)"],
    step: 8,
  });
}
