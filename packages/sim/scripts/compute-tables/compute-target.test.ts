import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { computeConfigs, lookupComputeConfig, resolveCompute } from "@ovl/tlx-emitter";
import { afterAll, describe, expect, it } from "vitest";
import { benchCases, shapeOperator } from "./compute-cases.js";
import {
  entryConfig,
  keepOtherOperators,
  mergeTables,
  poolRuns,
  tableOf,
  tlxSources,
  withTlx,
  writeTable,
  type ComputeResults,
  type ResultCase,
  type ResultShape,
} from "./compute-table.js";
import { sweepFile, targetArg, type ComputeBenchFile } from "./emit-compute.js";

const dirs: string[] = [];
const temp = () => {
  const d = mkdtempSync(join(tmpdir(), "ovl-compute-target-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * What compute_bench.py writes for `file` on a GPU, with fresh random times: every case
 * correct except a random few (wrong results must never win), and the file's target and
 * tables copied through as compute_bench.py copies them.
 */
function measured(file: ComputeBenchFile): ComputeResults {
  const shapes: ResultShape[] = file.shapes.map((s) => ({
    ...s,
    flops: 2 * s.M * s.N * s.K,
    cublas: { ms: 0.1 + Math.random(), tflops: 500, relErr: 1e-3 },
    cases: s.cases.map((c) => {
      const ms = 0.05 + Math.random();
      const wrong = Math.random() < 0.2;
      return { label: c.label, kind: c.kind, entry: c.entry, config: c.config, ms, allWritten: true, relErr: wrong ? 0.5 : 1e-3 };
    }),
  }));
  return {
    schema: "ovl.compute-results/v1",
    mode: file.mode,
    target: file.target,
    ...(file.tables === undefined ? {} : { tables: file.tables }),
    device: "NVIDIA H200",
    sms: 132,
    torch: "2.11",
    triton: "3.6",
    cuda: "13.0",
    method: "test",
    shapes,
    skipped: [],
  };
}

describe("emit-compute --target", () => {
  it("parses the flag: default the default target, a bad name names the targets", () => {
    expect(targetArg(["bench", "out"])).toBe("h200");
    expect(targetArg(["bench", "out", "--target", "h100"])).toBe("h100");
    expect(() => targetArg(["bench", "out", "--target", "a100"])).toThrow("--target must be one of h100, h200, b200, got 'a100'");
  });

  it("bench emits the tuned cases with the target's own table and records it", async () => {
    const { file } = await benchCases(temp(), { target: "h200" });
    expect(file.target).toBe("h200");
    expect(file.tables).toEqual(["h200"]);
    const h200 = computeConfigs("h200")!;
    for (const s of file.shapes) {
      const tuned = s.cases.find((c) => c.role === "tuned")!;
      const e = lookupComputeConfig(h200, { op: s.op, M: s.M, N: s.N, K: s.K, dtype: "bf16" })!.entry;
      expect(tuned.config).toMatchObject({ body: e.body, BM: e.BM, BN: e.BN, BK: e.BK, groupM: e.groupM });
    }
    await expect(benchCases(temp(), { target: "b200" })).rejects.toThrow(/no tuned entry for b200 \(no tuned table for b200\)/);
  }, 120_000);

  it("results of an H200 run become configs/h200.json, which compile() then reads as the H200's own table", async () => {
    const { file } = await benchCases(temp(), { target: "h200" });
    const results = measured(JSON.parse(JSON.stringify(file)) as ComputeBenchFile);
    const dir = temp();
    const { path, table } = writeTable(results, "h200", "results/runs/compute-test", "emitted", dir);
    expect(path).toBe(join(dir, "h200.json"));
    expect(computeConfigs("h200", dir)).toEqual(JSON.parse(readFileSync(path, "utf8")));
    expect(table.target).toBe("h200");
    const winner = (s: ResultShape) =>
      s.cases.filter((c) => c.kind === "emitted" && c.relErr! < 2e-2).sort((a, b) => a.ms! - b.ms!)[0]?.config;
    let checked = 0;
    for (const s of results.shapes) {
      const { op, choice } = resolveCompute(shapeOperator(s), { target: "h200", table: computeConfigs("h200", dir) });
      if (winner(s) === undefined || choice.source !== "table") continue; // nothing correct, or GEMM+RS chunks finer than the rows
      expect(choice).toMatchObject({ target: "h200", requested: "h200", match: "exact" });
      // Shapes of one operator may share M, N, K at different worlds: the choice is one of their winners.
      const winners = results.shapes
        .filter((x) => x.op === s.op && x.M === s.M && x.N === s.N && x.K === s.K)
        .map((x) => winner(x))
        .filter((w) => w !== undefined)
        .map((w) => `${w.body}.py ${w.BM}x${w.BN}x${w.BK} g${w.groupM}`);
      expect(winners).toContain(`${op.body.path} ${op.tile.BM}x${op.tile.BN}x${op.tile.BK} g${op.groupM}`);
      checked++;
    }
    expect(checked).toBeGreaterThan(results.shapes.length / 2);
    // Results emitted for one target never become another's table.
    expect(() => tableOf(results, "h100", "x")).toThrow("these results were emitted for h200");
  }, 120_000);

  it("--only merges one operator's entries of a run into the committed table, keeping the rest and where it came from", async () => {
    const { file } = await benchCases(temp(), { target: "h200" });
    // A table measured in one run (the committed one with a single source).
    const committed = { ...computeConfigs("h200")!, source: "results/runs/select-2026-11-25/select-h200.json" };
    const update = tableOf(
      measured(JSON.parse(JSON.stringify(file)) as ComputeBenchFile),
      "h200",
      "results/runs/rs-2026-12-01/bench.json",
      "emitted",
    );
    const merged = mergeTables(committed, update, ["gemm-rs"]);
    const of = (t: typeof committed, op: string) => t.entries.filter((e) => e.op === op);
    expect(of(merged, "ag-gemm")).toEqual(of(committed, "ag-gemm"));
    expect(of(merged, "gemm-rs")).toEqual(of(update, "gemm-rs"));
    expect(merged.measured).toBe("2026-12-01");
    expect(merged.source).toBe(
      "results/runs/select-2026-11-25/select-h200.json (ag-gemm); results/runs/rs-2026-12-01/bench.json (gemm-rs)",
    );
    // Merging again replaces the gemm-rs part of the source, not the ag-gemm one.
    const again = mergeTables(merged, { ...update, source: "results/runs/rs-2026-12-02/bench.json" }, ["gemm-rs"]);
    expect(again.source).toBe("results/runs/select-2026-11-25/select-h200.json (ag-gemm); results/runs/rs-2026-12-02/bench.json (gemm-rs)");
    expect(() => mergeTables(committed, { ...update, target: "h100" }, ["gemm-rs"])).toThrow(
      "cannot merge a h100 table into the h200 table",
    );
    expect(() => mergeTables(committed, { ...update, device: "NVIDIA H100 80GB HBM3, torch 2.11" }, ["gemm-rs"])).toThrow(/measured on/);
  }, 120_000);

  it("a whole table written from GEMM results keeps the committed ag-moe entries and their source", () => {
    const h100 = computeConfigs("h100")!;
    const moe = h100.entries.filter((e) => e.op === "ag-moe");
    expect(moe.length).toBe(6);
    const fresh = { ...h100, source: "results/runs/new-2026-12-03/bench.json", entries: h100.entries.filter((e) => e.op !== "ag-moe") };
    const kept = keepOtherOperators(fresh, h100);
    expect(kept.entries.filter((e) => e.op === "ag-moe")).toEqual(moe);
    expect(kept.source).toMatch(/^results\/runs\/new-2026-12-03\/bench\.json; .*moe-blocks-h100-2026-11-27.* \(ag-moe\)$/);
    // Results that measure every operator the table holds replace it whole; no table: the results alone.
    expect(keepOtherOperators(h100, h100)).toBe(h100);
    expect(keepOtherOperators(fresh, undefined)).toBe(fresh);
  });

  it("pools runs: per case the geometric mean of its times where every run timed it correctly, cuBLAS likewise", () => {
    const kase = (label: string, ms: number, ok = true): ResultCase => ({
      label,
      kind: "emitted",
      role: "alternative",
      entry: "k",
      config: { body: "gemm_tma_persistent", BM: 128, BN: 256, BK: 64, groupM: 8, numStages: 3, numWarps: 8 },
      ms,
      relErr: ok ? 1e-3 : 0.5,
      allWritten: true,
    });
    const shape = (cublas: number, cases: ResultCase[]): ResultShape => ({
      name: "ag_x",
      op: "ag-gemm",
      role: "consumer",
      mlp: "MLP-1",
      world: 2,
      M: 8192,
      N: 4096,
      K: 4096,
      dtype: "bf16",
      flops: 2 * 8192 * 4096 * 4096,
      cublas: { ms: cublas, tflops: 1, relErr: 1e-3 },
      cases,
    });
    const run = (s: ResultShape, device = "NVIDIA H100 80GB HBM3"): ComputeResults => ({
      schema: "ovl.compute-results/v1",
      mode: "bench",
      target: "h100",
      device,
      sms: 132,
      torch: "2.11",
      triton: "3.6",
      cuda: "13.0",
      method: "m",
      skipped: [],
      shapes: [s],
    });
    // "a" wins the first run, "b" the second by more: pooled, "b" is the faster; "c" failed once and is dropped.
    const one = run(shape(1, [kase("a", 1.0), kase("b", 1.02), kase("c", 0.5)]));
    const two = run(shape(0.9, [kase("a", 1.0), kase("b", 0.9), kase("c", 0.5, false)]));
    const pooled = poolRuns([one, two]);
    const s = pooled.shapes[0]!;
    expect(s.cases.map((c) => c.label)).toEqual(["a", "b"]);
    expect(s.cases[1]!.ms).toBeCloseTo(Math.sqrt(1.02 * 0.9), 12);
    expect(s.cublas.ms).toBeCloseTo(Math.sqrt(0.9), 12);
    expect(pooled.method).toBe("geometric mean over 2 runs of: m");
    expect(tableOf(pooled, "h100", "x", "emitted").entries[0]!.ms).toBeCloseTo(Number(Math.sqrt(1.02 * 0.9).toFixed(4)), 6);
    expect(poolRuns([one])).toBe(one);
    expect(() => poolRuns([one, run(shape(1, []), "NVIDIA H200")])).toThrow(/cannot pool runs/);
    expect(() => poolRuns([])).toThrow(/no runs/);
  });

  it("--tlx adds each shape's fastest correct TLX backend kernel, with the entry's own times from the same run", () => {
    // The committed table without TLX configurations (it may hold some already).
    const committed = computeConfigs("h200")!;
    const table = { ...committed, entries: committed.entries.map(({ tlx: _tlx, ...e }) => e) };
    const gemm = table.entries.filter((e): e is typeof e & { op: "ag-gemm" | "gemm-rs" } => e.op !== "ag-moe");
    const run = (tuned: (e: (typeof table.entries)[number]) => ResultCase["config"]): ComputeResults => ({
      schema: "ovl.compute-results/v1",
      mode: "bench",
      target: "h200",
      device: table.device.split(",")[0]!,
      sms: 132,
      torch: "2.11",
      triton: "3.6",
      cuda: "13.0",
      method: "test",
      skipped: [],
      shapes: gemm.slice(0, 6).map((e, i) => {
        const ws = (consumerSchedule: "cooperative" | "pingpong", stages: number) => ({
          consumerSchedule,
          stages,
          epilogueSplit: 2 as const,
        });
        const tlx = (label: string, ms: number, relErr: number, w: ReturnType<typeof ws>, BN: number): ResultCase => ({
          label,
          kind: "emitted",
          role: "tlx-emitted",
          entry: "tlx",
          config: { body: `tlx-${w.consumerSchedule}`, BM: 128, BN, BK: 64, groupM: 8, numStages: w.stages, numWarps: 4 },
          warpSpecialization: w,
          ms,
          relErr,
          allWritten: true,
        });
        return {
          name: `s${i}`,
          op: e.op,
          role: e.op === "ag-gemm" ? "consumer" : "producer",
          mlp: "MLP-1",
          world: 2,
          M: e.M,
          N: e.N,
          K: e.K,
          dtype: "bf16",
          flops: 1,
          cublas: { ms: 0.5 + i, tflops: 1, relErr: 1e-3 },
          cases: [
            { label: "tuned", kind: "emitted", role: "tuned", entry: "k", config: tuned(e), ms: 0.4 + i, relErr: 1e-3, allWritten: true },
            // The fastest is wrong and must never become the entry; then the ping-pong kernel wins.
            tlx("wrong", 0.01, 0.5, ws("cooperative", 3), 256),
            tlx("pp", 0.3 + i, 1e-3, ws("pingpong", 6), 128),
            tlx("coop", 0.35 + i, 1e-3, ws("cooperative", 3), 256),
          ],
        };
      }),
    });
    const own = entryConfig;
    const t = withTlx(table, run(own), "results/runs/tlx-2026-12-01/bench.json");
    const covered = t.entries.filter((e) => e.tlx !== undefined);
    expect(covered).toHaveLength(6);
    covered.forEach((e, i) => {
      expect(e.tlx).toEqual({
        consumerSchedule: "pingpong",
        BM: 128,
        BN: 128,
        BK: 64,
        groupM: 8,
        stages: 6,
        epilogueSplit: 2,
        ms: 0.3 + i,
      });
      expect(e.ms).toBeCloseTo(0.4 + i, 6);
      expect(e.cublasMs).toBeCloseTo(0.5 + i, 6);
    });
    expect(t.entries.slice(6)).toEqual(table.entries.slice(6));
    // The run measured AllGather+GEMM entries only: the source names it for them, the earlier run for GEMM+RS's.
    expect(t.source.endsWith("results/runs/tlx-2026-12-01/bench.json (tlx of ag-gemm, with the entries' ms and cublasMs)")).toBe(true);
    expect(t.source.match(/\(tlx of gemm-rs, with the entries' ms and cublasMs\)/g)).toHaveLength(1);
    expect(t.source).not.toContain("(tlx, with");
    // A second run replaces the tlx part of the operators it measured, and keeps the others'.
    const second = withTlx(t, run(own), "results/runs/tlx-2026-12-02/bench.json").source;
    expect(second.match(/\(tlx of ag-gemm,/g)).toHaveLength(1);
    expect(second).toContain("tlx-2026-12-02/bench.json (tlx of ag-gemm,");
    expect(second.match(/\(tlx of gemm-rs,/g)).toHaveLength(1);
    expect(tlxSources({ ...t, entries: t.entries }, new Set(["ag-gemm", "gemm-rs"]), "r.json")).toBe(
      `${t.source
        .split("; ")
        .filter((p) => !p.includes("(tlx"))
        .join("; ")}; r.json (tlx, with the entries' ms and cublasMs)`,
    );
    // A table made from such a run (a new winner, --only) carries the same run's TLX kernel too.
    const fresh = tableOf(run(own), "h200", "results/runs/tlx-2026-12-01/bench.json", "emitted");
    expect(fresh.entries).toHaveLength(6);
    for (const e of fresh.entries) expect(e.tlx).toEqual(t.entries.find((x) => x.op === e.op && x.N === e.N && x.K === e.K)!.tlx);
    // A run whose tuned kernels are not the table's, or another GPU's, is refused.
    expect(() =>
      withTlx(
        table,
        run((e) => ({ ...own(e), BN: e.BN / 2 })),
        "x",
      ),
    ).toThrow(/is not the table's entry/);
    expect(() => withTlx(table, { ...run(own), device: "NVIDIA H100 80GB HBM3" }, "x")).toThrow(/measured on/);
  });

  it("sweep records its target", () => {
    expect(sweepFile(2, "h100").file.target).toBe("h100");
  });
});
