// `ovl tune --measurements`: the tuner decides from a GPU run's times, measured baseline included.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ovl } from "./testing.js";

const temp = () => mkdtempSync(join(tmpdir(), "ovl-tune-m-"));

interface TuneJson {
  decision: string;
  winnerKey: string;
  measuredMs?: number;
  figures: { overlapped?: { key: string; ms: number; source: string }; sequential?: { key: string; ms: number; source: string } };
  top: { key: string; predictedMs: number }[];
  measured: { key: string; measuredMs?: number; error?: string }[];
}

describe("ovl tune --measurements", () => {
  it("decides from the measured figures of both paths and prints them (MLP-1 AG+GEMM, world 4)", async () => {
    const dir = temp();
    const model = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--json"]);
    expect(model.status).toBe(0);
    const ranked = JSON.parse(model.stdout) as TuneJson;
    expect(ranked.decision).toBe("overlapped");
    // A run where every overlapped candidate is slower than not overlapping (0.507 ms, measured on 4×H200).
    const top = ranked.top.filter((t) => t.key !== "sequential").slice(0, 3);
    const file = join(dir, "measured.json");
    writeFileSync(
      file,
      JSON.stringify({
        $schema: "ovl.tune-measurements/v1",
        device: "4xH200",
        problem: { operator: "ag-gemm", M: 8192, N: 2752, K: 4096, world: 4 },
        measurements: [...top.map((t, i) => ({ candidate: t.key, ms: 0.58 + 0.01 * i })), { candidate: "sequential", ms: 0.507 }],
      }),
    );
    const r = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--measurements", file, "--json"]);
    expect(r.status).toBe(0);
    const j = JSON.parse(r.stdout) as TuneJson;
    expect(j.decision).toBe("sequential");
    expect(j.measuredMs).toBe(0.507);
    expect(j.figures.sequential).toEqual({ key: "sequential", ms: 0.507, source: "measured" });
    expect(j.figures.overlapped).toEqual({ key: top[0]!.key, ms: 0.58, source: "measured" });
    const text = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--measurements", file]);
    expect(text.stdout).toMatch(/overlapped: 0\.580 ms measured/);
    expect(text.stdout).toMatch(/not overlapped \(collective, then GEMM\): 0\.507 ms measured/);
    expect(text.stdout).toMatch(/overlap loses/);
  });

  it("marks a path the file does not measure as predicted", async () => {
    const dir = temp();
    const file = join(dir, "baseline-only.json");
    writeFileSync(
      file,
      JSON.stringify({ $schema: "ovl.tune-measurements/v1", device: "H100", measurements: [{ candidate: "sequential", ms: 0.9 }] }),
    );
    const r = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--measurements", file, "--json"]);
    const j = JSON.parse(r.stdout) as TuneJson;
    expect(j.figures.sequential?.source).toBe("measured");
    expect(j.figures.overlapped?.source).toBe("predicted");
    expect(j.measured.filter((m) => m.error !== undefined).length).toBeGreaterThan(0);
  });

  it("refuses a malformed file, another problem's file, and --gpus with --measurements", async () => {
    const dir = temp();
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ $schema: "ovl.tune-measurements/v1", device: "H100", measurements: [{ candidate: "x", ms: -1 }] }));
    const r1 = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--measurements", bad]);
    expect(r1.status).toBe(2);
    expect(r1.stderr).toMatch(/measurements\[0\] needs a candidate key and a positive ms/);
    const other = join(dir, "other.json");
    writeFileSync(
      other,
      JSON.stringify({
        $schema: "ovl.tune-measurements/v1",
        device: "H100",
        problem: { operator: "ag-gemm", M: 8192, N: 1376, K: 4096, world: 8 },
        measurements: [],
      }),
    );
    const r2 = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--measurements", other]);
    expect(r2.status).toBe(2);
    expect(r2.stderr).toMatch(/it measured ag-gemm M=8192 N=1376 K=4096 world=8/);
    const r3 = await ovl(["tune", "ag-gemm", "--world", "4", "--no-cache", "--gpus", "4", "--measurements", other]);
    expect(r3.status).toBe(2);
  });
});
