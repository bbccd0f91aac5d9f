import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { measure, toMarkdown, writeSuite } from "./harness.js";

describe("measure", () => {
  it("counts calls and orders its quantiles", () => {
    let calls = 0;
    const m = measure(
      "busy",
      () => {
        calls++;
        let x = 0;
        for (let i = 0; i < 2000; i++) x += Math.sqrt(i);
        return x;
      },
      { warmup: 2, maxIterations: 7, budgetMs: 10_000, itemsPerIteration: 2000 },
    );
    expect(m.iterations).toBe(7);
    expect(calls).toBe(9);
    expect(m.p10Ms).toBeLessThanOrEqual(m.medianMs);
    expect(m.medianMs).toBeLessThanOrEqual(m.p90Ms);
    expect(m.itemsPerSecond).toBeCloseTo((2000 * 1000) / m.medianMs, 6);
  });
});

describe("writeSuite", () => {
  it("writes the JSON with every figure and a markdown table", () => {
    const dir = mkdtempSync(join(tmpdir(), "ovl-bench-"));
    const result = {
      suite: "unit",
      description: "a test suite",
      measurements: [{ name: "case a", itemsPerIteration: 10, iterations: 5, medianMs: 2, p10Ms: 1, p90Ms: 3, itemsPerSecond: 5000 }],
    };
    const md = writeSuite(result, dir);
    const json = JSON.parse(readFileSync(join(dir, "unit.json"), "utf8"));
    expect(json.measurements).toEqual(result.measurements);
    expect(json.node).toBe(process.version);
    expect(readFileSync(join(dir, "unit.md"), "utf8")).toBe(md);
    expect(md).toContain("| case a | 2.00 | 1.00 | 3.00 | 10 | 5000 | 5 |");
    expect(toMarkdown(result, "m")).toContain("Machine: m.");
  });
});
