import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { latencyBarChart, latencyBarSpec } from "./latency.js";
import { timelineChart, type TimelineChartInput } from "./timeline.js";
import { reportLatencyRows, type RunReportLike } from "./report-rows.js";

const SUITE = join(dirname(fileURLToPath(import.meta.url)), "../../../../results/runs/suite-2026-11-22");

const sim: TimelineChartInput = {
  plan: "all-gather-swizzle-push",
  hardware: "H200_SXM",
  latencyMs: 0.5,
  boundMs: 0.45,
  nonOverlappedMs: 0.7,
  ranks: [0, 1].map((rank) => ({
    rank,
    events: [
      { lane: "compute", kind: "wave", startMs: 0.02, endMs: 0.25, label: "wave 0 (704 tiles)" },
      { lane: "waits", kind: "wait", startMs: 0.25, endMs: 0.27, label: "wave 1 waits for its chunk" },
      { lane: "compute", kind: "wave", startMs: 0.27, endMs: 0.5, label: "wave 1 (704 tiles)" },
      { lane: "stream 0", kind: "launch", startMs: 0, endMs: 0.014, label: "launch push" },
      { lane: "stream 0", kind: "transfer", startMs: 0.014, endMs: 0.1, label: `push ${rank}→${1 - rank}` },
      { lane: "stream 0", kind: "signal", startMs: 0.1, endMs: 0.103, label: "signal" },
    ],
  })),
};

describe("timelineChart", () => {
  it("renders one row per rank and lane, with the event kinds in the legend", async () => {
    const svg = await timelineChart(sim);
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg).toContain("</svg>");
    for (const label of [
      "rank 0 · compute",
      "rank 0 · waits",
      "rank 0 · stream 0",
      "rank 1 · compute",
      "rank 1 · stream 0",
      "transfer",
      "wait",
      "wave",
      "time (ms)",
    ]) {
      expect(svg).toContain(label);
    }
    expect(svg).toContain("latency 0.500 ms");
    // Every event is one bar.
    expect((svg.match(/aria-roledescription="bar"/g) ?? []).length).toBe(12);
  });

  it("filters ranks", async () => {
    const svg = await timelineChart(sim, { ranks: [1], title: "only rank 1" });
    expect(svg).toContain("only rank 1");
    expect(svg).not.toContain("rank 0 · compute");
  });
});

describe("latencyBarChart", () => {
  it("draws the measured suite: ovl beside its baselines, failed cases left out", async () => {
    const reports = JSON.parse(readFileSync(join(SUITE, "w2-run1.json"), "utf8")) as Record<string, RunReportLike>;
    const rows = reportLatencyRows(reports);
    expect(rows.some((r) => r.case === "mlp1_w2_gemm_rs_ce")).toBe(false); // it timed out
    expect(rows.find((r) => r.case === "mlp1_w2_ag_gemm_s1" && r.series === "ovl")?.ms).toBeCloseTo(0.562, 3);
    const svg = await latencyBarChart(rows, { title: "suite w2" });
    expect(svg.startsWith("<svg")).toBe(true);
    for (const label of ["suite w2", "mlp1_w2_ag_gemm_s1", "ovl", "PyTorch async-TP", "latency (ms, lower is better)"])
      expect(svg).toContain(label);
    expect((svg.match(/aria-roledescription="bar"/g) ?? []).length).toBe(rows.length);
  });

  it("refuses rows that are not times", () => {
    expect(() => latencyBarSpec([{ case: "x", series: "ovl", ms: Number.NaN }])).toThrow(/finite time/);
  });
});
