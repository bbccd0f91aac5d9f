import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkTileSchedule, parsePlanJson, TileSchedule, validatePlan } from "@ovl/chunk-plan";
import { runDemo } from "./demo.js";

const bin = join(__dirname, "..", "dist", "bin.js");

describe("ovl demo", () => {
  it("writes a plan that validates and a tile schedule that checks against it", () => {
    const outDir = mkdtempSync(join(tmpdir(), "ovl-demo-"));
    const lines: string[] = [];
    const result = runDemo({ world: 3, split: 2, outDir, write: (l) => lines.push(l) });
    expect(result.files).toHaveLength(4);
    const plan = parsePlanJson(readFileSync(join(outDir, "plan.json"), "utf8"));
    expect(validatePlan(plan)).toEqual({ ok: true });
    expect(plan.ranks).toHaveLength(3);
    const schedule = TileSchedule.parse(JSON.parse(readFileSync(join(outDir, "schedule.json"), "utf8")));
    expect(checkTileSchedule(schedule, plan)).toEqual([]);
    expect(lines.some((l) => l.startsWith("2. validate  ok"))).toBe(true);
    expect(readFileSync(join(outDir, "plan-rank0.mmd"), "utf8")).toMatch(/^flowchart/);
  });

  it("runs from the binary and rejects bad input with status 2 and a hint", () => {
    const outDir = mkdtempSync(join(tmpdir(), "ovl-demo-"));
    const ok = spawnSync(process.execPath, [bin, "demo", "--world", "2", "--split", "1", "--out", outDir], { encoding: "utf8" });
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain("2 ranks, split 1");
    const bad = spawnSync(process.execPath, [bin, "demo", "--world", "zero"], { encoding: "utf8" });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("--world needs a positive integer");
    const unknown = spawnSync(process.execPath, [bin, "deploy"], { encoding: "utf8" });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('unknown command "deploy"');
  });
});
