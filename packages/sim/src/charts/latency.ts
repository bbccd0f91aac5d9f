// Bar charts of operator latency against baselines, per case: ovl (measured or
// predicted) beside cuBLAS + NCCL not overlapped, PyTorch async-TP and the bound.
import type { VegaLiteSpec } from "./spec.js";
import { renderSvg } from "./svg.js";

/** One bar: a case (e.g. `mlp1_w2_ag_gemm_s1`), the series it belongs to (`ovl`, `not overlapped`, …) and its time. */
export interface LatencyRow {
  readonly case: string;
  readonly series: string;
  readonly ms: number;
}

/** Options of {@link latencyBarChart}. */
export interface LatencyBarChartOptions {
  readonly title?: string;
  readonly subtitle?: string;
  /** Series in legend and bar order (default: first appearance). */
  readonly series?: readonly string[];
  /** Width of one bar in pixels (default 14). */
  readonly step?: number;
}

/** The Vega-Lite spec of the grouped bar chart. */
export function latencyBarSpec(rows: readonly LatencyRow[], options: LatencyBarChartOptions = {}): VegaLiteSpec {
  for (const r of rows) {
    if (!Number.isFinite(r.ms) || r.ms < 0) {
      throw new RangeError(
        `latency row ${r.case} / ${r.series}: ms = ${r.ms}; give a finite time in milliseconds (leave failed cases out)`,
      );
    }
  }
  const series = options.series ?? [...new Set(rows.map((r) => r.series))];
  const cases = [...new Set(rows.map((r) => r.case))];
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title: { text: options.title ?? "Latency per case", ...(options.subtitle === undefined ? {} : { subtitle: options.subtitle }) },
    data: { values: rows.map((r) => ({ ...r })) },
    width: { step: options.step ?? 14 },
    height: 320,
    mark: { type: "bar" },
    encoding: {
      x: { field: "case", type: "nominal", sort: cases, title: null, axis: { labelAngle: -35, labelLimit: 220 } },
      xOffset: { field: "series", type: "nominal", sort: series },
      y: { field: "ms", type: "quantitative", title: "latency (ms, lower is better)" },
      color: { field: "series", type: "nominal", sort: series, title: null, legend: { labelLimit: 320 } },
      tooltip: [
        { field: "case", type: "nominal" },
        { field: "series", type: "nominal" },
        { field: "ms", type: "quantitative", format: ".3f" },
      ],
    },
  };
}

/** The grouped bar chart as an SVG document a browser opens. */
export function latencyBarChart(rows: readonly LatencyRow[], options: LatencyBarChartOptions = {}): Promise<string> {
  return renderSvg(latencyBarSpec(rows, options));
}
