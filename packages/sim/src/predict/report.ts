// The multi-node predictions as people read them: one markdown table per model and one grouped
// bar chart (SVG through the package's Vega-Lite charts), every figure marked predicted.
import { latencyBarChart, type LatencyRow } from "../charts/latency.js";
import type { MultiNodeRow } from "./multi-node.js";

const ms = (v: number): string => v.toFixed(3);

/** A markdown table per hardware model: operator, shape, overlapped and not-overlapped predictions, speedup, the plan. */
export function multiNodeMarkdown(rows: readonly MultiNodeRow[]): string {
  const out: string[] = [];
  for (const hardware of [...new Set(rows.map((r) => r.hardware))]) {
    const mine = rows.filter((r) => r.hardware === hardware);
    const first = mine[0]!;
    out.push(`### ${hardware}: ${first.nodes} nodes × ${first.gpusPerNode} GPUs (world ${first.world}) — predicted, not measured`, "");
    out.push(
      "| operator | shape | overlapped (ms) | not overlapped (ms) | speedup | tuned (ms) | NCCL-like algorithm | overlapped candidate |",
    );
    out.push("| --- | --- | ---: | ---: | ---: | ---: | --- | --- |");
    for (const r of mine) {
      out.push(
        `| ${r.operator} | ${r.shape} | ${ms(r.overlappedMs)} | ${ms(r.notOverlappedMs)} | ${r.speedup.toFixed(2)}× | ${ms(r.tunedMs)} | ${r.collective} | \`${r.overlapped}\` |`,
      );
    }
    out.push("");
    const ranked = mine.filter((r) => r.byPlan !== undefined);
    if (ranked.length > 0) {
      const shapes = [...new Set(ranked.flatMap((r) => Object.keys(r.byPlan!)))];
      out.push(`Best overlapped prediction per plan shape (ms; — : the operator has no such plan):`, "");
      out.push(`| operator | shape | ${shapes.join(" | ")} |`, `| --- | --- |${shapes.map(() => " ---: |").join("")}`);
      for (const r of ranked) {
        out.push(
          `| ${r.operator} | ${r.shape} | ${shapes.map((p) => (r.byPlan![p] === undefined ? "—" : ms(r.byPlan![p]!))).join(" | ")} |`,
        );
      }
      out.push("");
    }
  }
  return out.join("\n");
}

/** Grouped bars of the layer rows (`mlp`, `moe`): overlapped against not overlapped per model and shape, as SVG. */
export async function multiNodeChart(rows: readonly MultiNodeRow[]): Promise<string> {
  const bars: LatencyRow[] = rows
    .filter((r) => r.operator === "mlp" || r.operator === "moe")
    .flatMap((r) => {
      const key = `${r.shape} ${r.hardware.replace(/^.*_/, "")}`;
      return [
        { case: key, series: "overlapped (predicted)", ms: r.overlappedMs },
        { case: key, series: "not overlapped (predicted)", ms: r.notOverlappedMs },
      ];
    });
  return latencyBarChart(bars, {
    title: "MLP and MoE layers across nodes (H200, 400 Gb/s per GPU): model predictions",
    subtitle: "overlapped: best two-level plan the tuner ranks; not overlapped: GEMM then NCCL-like collective on the same fabric",
  });
}
