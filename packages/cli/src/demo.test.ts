import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkTileSchedule, parsePlanJson, TileSchedule, validatePlan } from "@ovl/chunk-plan";
import { SimulationResult } from "@ovl/sim";
import { Manifest } from "@ovl/tlx-emitter";
import { ovl } from "./testing.js";

describe("ovl demo", () => {
  it("writes every file it lists, in ./ovl-demo of a fresh folder, and prints the summary", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "ovl-demo-"));
    const r = await ovl(["demo", "--world", "4", "--json"], cwd);
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as {
      files: string[];
      speedup: number;
      predictedMs: number;
      notOverlappedMs: number;
      fractionOfBound: number;
      boundMs: number;
      emulation: object;
    };
    const out = join(cwd, "ovl-demo");
    for (const f of summary.files) {
      expect(f.startsWith(out)).toBe(true);
      expect(existsSync(f), f).toBe(true);
    }
    expect(summary.speedup).toBeCloseTo(summary.notOverlappedMs / summary.predictedMs, 9);
    expect(summary.fractionOfBound).toBeCloseTo(summary.boundMs / summary.predictedMs, 9);
    expect(r.stderr).toMatch(/summary: overlapped AG\+GEMM is predicted .* of its perfect-overlap bound on 4 × H200_SXM/);

    const plan = parsePlanJson(readFileSync(join(out, "plan.json"), "utf8"));
    expect(validatePlan(plan)).toEqual({ ok: true });
    const schedule = TileSchedule.parse(JSON.parse(readFileSync(join(out, "schedule.json"), "utf8")));
    expect(checkTileSchedule(schedule, plan)).toEqual([]);
    expect(Manifest.parse(JSON.parse(readFileSync(join(out, "triton", "manifest.json"), "utf8"))).world).toBe(4);
    expect(Manifest.parse(JSON.parse(readFileSync(join(out, "tlx", "manifest.json"), "utf8"))).world).toBe(4);
    const sim = SimulationResult.parse(JSON.parse(readFileSync(join(out, "sim.json"), "utf8")));
    expect(sim.latencyMs).toBeCloseTo(summary.predictedMs, 12);
    expect(readFileSync(join(out, "timeline.svg"), "utf8")).toMatch(/^<svg/);
    expect(readFileSync(join(out, "report.md"), "utf8")).toContain("| speed-up over not overlapping |");
    if (!("skipped" in summary.emulation)) expect(summary.emulation).toMatchObject({ ok: true });
    // The tuned choice is never predicted slower than the demo's own plan or than not overlapping.
    const tuned = (summary as unknown as { tuned: { predictedMs: number; decision: string; message: string } }).tuned;
    expect(tuned.predictedMs).toBeLessThanOrEqual(Math.min(summary.predictedMs, summary.notOverlappedMs) + 1e-12);
    expect(tuned.message).toMatch(tuned.decision === "sequential" ? /overlap loses/ : /overlapping wins/);
  });

  it("prints the steps as text, and refuses a world MLP-1 cannot be sharded over", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "ovl-demo-"));
    const [ok, bad] = await Promise.all([
      ovl(["demo", "--world", "2", "--split", "1", "--no-emulate", "--out", "d"], cwd),
      ovl(["demo", "--world", "3"], cwd),
    ]);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toContain("2 ranks of the H200_SXM model, split 1");
    expect(ok.stdout).toMatch(/^2\. validate {2}ok/m);
    expect(ok.stdout).toContain("9. emulate   skipped: turned off (--no-emulate)");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("use --world 2, 4, 8");
  });
});
