// A per-rank timeline of a simulated (or measured) overlapped operator: one row per rank
// and lane (compute, waits, each communication stream), bars for waves or tiles, waits,
// the reduction pass, copy launches, transfers and signal writes.
import type { VegaLiteSpec } from "./spec.js";
import { renderSvg } from "./svg.js";

/** One interval on a lane; the shape of `TimelineEvent` in the simulator's `ovl.sim-result/v1`. */
export interface TimelineChartEvent {
  readonly lane: string;
  readonly kind: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly label: string;
}

/** What the timeline draws: a `SimulationResult` from `simulate` fits as is. */
export interface TimelineChartInput {
  readonly plan: string;
  readonly hardware: string;
  readonly latencyMs: number;
  readonly boundMs?: number;
  readonly nonOverlappedMs?: number;
  readonly ranks: readonly { readonly rank: number; readonly events: readonly TimelineChartEvent[] }[];
}

/** Options of {@link timelineChart}. */
export interface TimelineChartOptions {
  readonly title?: string;
  /** Plot width in pixels (default 900). */
  readonly width?: number;
  /** Only these ranks (default all). */
  readonly ranks?: readonly number[];
}

const KINDS = ["wave", "tile", "wait", "reduce", "launch", "transfer", "collective", "signal"] as const;
const COLORS = ["#4c78a8", "#72b7b2", "#e45756", "#b279a2", "#bab0ac", "#f58518", "#eeca3b", "#54a24b"];

/** The Vega-Lite spec of the timeline (for callers that embed or restyle it). */
export function timelineSpec(sim: TimelineChartInput, options: TimelineChartOptions = {}): VegaLiteSpec {
  const keep = options.ranks === undefined ? null : new Set(options.ranks);
  const values = sim.ranks
    .filter((r) => keep === null || keep.has(r.rank))
    .flatMap((r) =>
      r.events.map((e) => ({
        row: `rank ${r.rank} · ${e.lane}`,
        rank: r.rank,
        kind: e.kind,
        start: e.startMs,
        end: Math.max(e.endMs, e.startMs),
        label: e.label,
        ms: e.endMs - e.startMs,
      })),
    );
  const rows = [...new Set(values.map((v) => v.row))].sort((a, b) => compareRows(a, b));
  const marks = [
    { figure: "predicted", ms: sim.latencyMs },
    ...(sim.boundMs === undefined ? [] : [{ figure: "perfect-overlap bound", ms: sim.boundMs }]),
  ];
  const summary = [`latency ${sim.latencyMs.toFixed(3)} ms`];
  if (sim.boundMs !== undefined) summary.push(`bound ${sim.boundMs.toFixed(3)} ms`);
  if (sim.nonOverlappedMs !== undefined) summary.push(`not overlapped ${sim.nonOverlappedMs.toFixed(3)} ms`);
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v5.json",
    title: { text: options.title ?? `${sim.plan} on ${sim.hardware}`, subtitle: summary.join(" · ") },
    width: options.width ?? 900,
    height: { step: 16 },
    layer: [
      {
        data: { values },
        mark: { type: "bar", cornerRadius: 1 },
        encoding: {
          y: { field: "row", type: "nominal", sort: rows, title: null },
          x: { field: "start", type: "quantitative", title: "time (ms)" },
          x2: { field: "end" },
          color: { field: "kind", type: "nominal", scale: { domain: [...KINDS], range: COLORS }, title: "event" },
          tooltip: [
            { field: "label", type: "nominal" },
            { field: "start", type: "quantitative", format: ".4f" },
            { field: "ms", type: "quantitative", format: ".4f" },
          ],
        },
      },
      {
        data: { values: marks },
        mark: { type: "rule", strokeDash: [4, 3] },
        encoding: {
          x: { field: "ms", type: "quantitative" },
          color: { value: "#333" },
          tooltip: [
            { field: "figure", type: "nominal" },
            { field: "ms", type: "quantitative", format: ".4f" },
          ],
        },
      },
    ],
  };
}

/** The timeline as an SVG document a browser opens. */
export function timelineChart(sim: TimelineChartInput, options: TimelineChartOptions = {}): Promise<string> {
  return renderSvg(timelineSpec(sim, options));
}

// Rows sort by rank number, then compute, waits, streams by number, other lanes last.
function compareRows(a: string, b: string): number {
  const key = (s: string): [number, number] => {
    const m = /^rank (\d+) · (compute|waits|stream (\d+))?/.exec(s);
    const lane = m?.[2] === "compute" ? -2 : m?.[2] === "waits" ? -1 : m?.[3] !== undefined ? Number(m[3]) : 1e9;
    return [Number(m?.[1] ?? 0), lane];
  };
  const [ra, la] = key(a);
  const [rb, lb] = key(b);
  return ra - rb || la - lb || a.localeCompare(b);
}
