import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { measure, toMarkdown, writeSuite } from "./harness.js";
import { cpuRun } from "./run.js";

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

describe("cpuRun", () => {
  it("describes a CPU bench run by the suites its folder holds, with figures its markdown prints", () => {
    const dir = mkdtempSync(join(tmpdir(), "ovl-cpu-bench-"));
    const m = { itemsPerIteration: 1, iterations: 5, p10Ms: 1, p90Ms: 3, itemsPerSecond: 500 };
    writeSuite({ suite: "mapping", description: "d", measurements: [{ ...m, name: "simplify", medianMs: 2.345 }] }, dir);
    writeSuite({ suite: "compile", description: "d", measurements: [{ ...m, name: "compile()", medianMs: 123.4 }] }, dir);
    const run = cpuRun(dir, "2026-12-01");
    expect(run.operators.sort()).toEqual(["compile", "mapping"]);
    expect(run.worlds).toEqual([2, 3, 4, 5, 6, 7, 8]);
    expect(run.headline).toContain("compile() 123 ms");
    expect(run.headline).toContain("simplify 2.35 ms");
    expect(readFileSync(join(dir, "mapping.md"), "utf8")).toContain("| simplify | 2.35 |");
  });
});
