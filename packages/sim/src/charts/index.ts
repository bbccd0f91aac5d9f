// Barrel of the charts module: timelines and latency bar charts as SVG, via Vega-Lite.
export { renderSvg } from "./svg.js";
export type { VegaLiteSpec } from "./spec.js";
export {
  timelineChart,
  timelineSpec,
  type TimelineChartInput,
  type TimelineChartEvent,
  type TimelineChartOptions,
} from "./timeline.js";
export { latencyBarChart, latencyBarSpec, type LatencyRow, type LatencyBarChartOptions } from "./latency.js";
export { reportLatencyRows, BASELINE_SERIES, type RunReportLike } from "./report-rows.js";
