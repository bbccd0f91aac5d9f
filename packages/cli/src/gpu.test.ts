// The --gpus paths (tune's measurement, the demo's GPU run) against a stand-in runner:
// they check what the CLI passes to torchrun and how it reads the reports back.
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { fakeGpuRunner, ovl } from "./testing.js";

describe("--gpus through a stand-in runner", () => {
  it("tune measures the model's best k and the non-overlapped baseline under torchrun and keeps the fastest measured", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ovl-gpu-"));
    const python = fakeGpuRunner(dir);
    const cache = join(dir, "cache.json");
    const r = await ovl(["tune", "ag-gemm", "--world", "2", "--gpus", "2", "--top-k", "3", "--python", python, "--cache", cache, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      top: { key: string; predictedMs: number }[];
      measured: { key: string; measuredMs?: number }[];
      winnerKey: string;
      measuredMs: number;
      device: string;
      figures: { sequential?: { ms: number; source: string } };
    };
    // The best 3 the model tells apart: candidates differing only in their swizzle (group) and
    // predicted alike are measured once.
    const sansGroup = (key: string) => key.replace(/ group=\d+$/, "");
    const overlapped = out.top.filter((t) => t.key !== "sequential");
    const distinct = overlapped.filter(
      (t, i) => overlapped.findIndex((u) => sansGroup(u.key) === sansGroup(t.key) && u.predictedMs === t.predictedMs) === i,
    );
    // ... and the non-overlapped baseline, always, in the same run (the stand-in's 0.5 ms).
    expect(out.measured.map((m) => m.key)).toEqual([...distinct.slice(0, 3).map((t) => t.key), "sequential"]);
    expect(new Set(out.measured.map((m) => sansGroup(m.key))).size).toBe(4);
    expect(out.figures.sequential).toMatchObject({ ms: 0.5, source: "measured" });
    const fastest = [...out.measured].sort((a, b) => a.measuredMs! - b.measuredMs!)[0]!;
    expect(out.winnerKey).toBe(fastest.key);
    expect(out.measuredMs).toBe(fastest.measuredMs);
    expect(out.device).toBe("H200_SXM measured on 2 GPUs");
    const calls = readFileSync(join(dir, "calls.log"), "utf8").trim().split("\n");
    expect(calls).toHaveLength(4);
    for (const c of calls) expect(c).toMatch(/^-m torch\.distributed\.run --nproc_per_node=2 -m ovl_runtime run \S+manifest\.json --out /);
    expect(calls[3]).toMatch(/--baselines/);
    expect(r.stderr).toMatch(/measure 100% \(4\/4\)/);
  });

  it("demo --gpus N runs the emitted MLP-1 manifest with baselines and reports it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ovl-gpu-"));
    const python = fakeGpuRunner(dir);
    const r = await ovl(["demo", "--gpus", "2", "--no-emulate", "--python", python, "--out", join(dir, "demo"), "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as { world: number; gpu: { ok: boolean; ms: number; baselines: Record<string, number> } };
    expect(summary.world).toBe(2);
    expect(summary.gpu).toEqual({ ok: true, ms: 0.2, baselines: { "all-gather-then-gemm": 0.5, "gemm-then-reduce-scatter": 0.5 } });
    const call = readFileSync(join(dir, "calls.log"), "utf8").trim();
    expect(call).toContain("--nproc_per_node=2 -m ovl_runtime run");
    expect(call).toContain(join(dir, "demo", "triton", "manifest.json"));
    expect(call).toContain("--baselines");
    expect(readFileSync(join(dir, "demo", "report.md"), "utf8")).toContain("| measured on GPUs | 0.200 ms");
    const wrong = await ovl(["demo", "--gpus", "2", "--world", "4", "--out", join(dir, "wrong")]);
    expect(wrong.status).toBe(2);
    expect(wrong.stderr).toContain("--gpus 2 runs the demo on 2 ranks; drop --world or set it to 2");
    expect(existsSync(join(dir, "wrong"))).toBe(false);
  });

  it("run --gpus N prints the torchrun command, runs it and reads the report", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ovl-gpu-"));
    const python = fakeGpuRunner(dir);
    await ovl(["emit", "gemm-rs", "--world", "2", "--split", "1", "--out", join(dir, "rs")]);
    const m = join(dir, "rs", "manifest.json");
    const r = await ovl(["run", m, "--gpus", "2", "--baselines", "--python", python, "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain(`$ torchrun --nproc_per_node=2 -m ovl_runtime run ${m} --out ${join(dir, "rs", "report.json")} --baselines`);
    expect(JSON.parse(r.stdout)).toMatchObject({ mode: "gpu", world: 2, ok: true, times: { maxMedian: 0.1 } });
    const table = await ovl(["report", join(dir, "rs", "report.json")]);
    expect(table.stdout).toMatch(/gemm_rs_mlp1_w2_ce_s1 +gpu .* 5\.00×/);
  });
});
