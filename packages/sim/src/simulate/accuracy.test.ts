import { describe, expect, it } from "vitest";
import {
  baselineComparisons,
  type Comparison,
  inClaim,
  type KernelComparison,
  meanAbsError,
  reduceKernelComparisons,
  suite2Comparisons,
  suiteComparisons,
  summarize,
} from "./accuracy.test-util.js";

// Guards the calibration against regressions; the errors themselves are reported in
// docs/simulate.md. Thresholds sit just above what the current model reaches, so a change
// that makes any group worse fails here. suite2-2026-11-22 is out of sample for every
// parameter except smCopy.bandwidthPerSmGBps, fitted on x2's SM rows.
const maxAbs = (rows: readonly Comparison[]) => Math.max(...rows.map((r) => Math.abs(r.error)));
const within = (rows: readonly Comparison[], e = 0.15) => rows.filter((r) => Math.abs(r.error) <= e).length;

describe("model vs measurements (H200, 2026-11-22)", () => {
  it("predicts cuBLAS GEMM times of the MLP suite and the rows sweep", () => {
    const { gemm } = baselineComparisons();
    expect(gemm).toHaveLength(36);
    expect(meanAbsError(gemm)).toBeLessThan(0.12);
    for (const r of gemm) expect(Math.abs(r.error)).toBeLessThan(0.25);
  });

  it("predicts NCCL all-gather and reduce-scatter times", () => {
    const { collective } = baselineComparisons();
    expect(meanAbsError(collective)).toBeLessThan(0.12);
    for (const r of collective) expect(Math.abs(r.error)).toBeLessThan(0.25);
  });

  it("fits rs-reduce alone: H200 (its calibration), H100 (its own), and the kernel before vectorisation", () => {
    const { h200, h100 } = reduceKernelComparisons();
    expect(h200).toHaveLength(6);
    expect(meanAbsError(h200)).toBeLessThan(0.025);
    expect(maxAbs(h200)).toBeLessThan(0.045);
    expect(h100).toHaveLength(15);
    expect(meanAbsError(h100)).toBeLessThan(0.055);
    expect(maxAbs(h100)).toBeLessThan(0.1);
    const old = reduceKernelComparisons(true).h200;
    expect(old).toHaveLength(6);
    expect(meanAbsError(old)).toBeLessThan(0.065);
    expect(maxAbs(old)).toBeLessThan(0.105);
  });
});

describe("model vs suite2-2026-11-22 (4×H200, worlds 2 and 4; out of sample)", () => {
  const fresh = suite2Comparisons();
  const group = (operator: KernelComparison["operator"], world: number) =>
    fresh.filter((r) => inClaim(r) && r.operator === operator && r.world === world);

  it("compares every timed case of x1…x4 except the TLX ones and x3's wide SM push", () => {
    expect(fresh.filter((r) => r.file.startsWith("x1"))).toHaveLength(12);
    expect(fresh.filter((r) => r.file.startsWith("x2"))).toHaveLength(72);
    expect(fresh.filter((r) => r.file.startsWith("x3"))).toHaveLength(24);
    expect(fresh.filter((r) => r.file.startsWith("x4"))).toHaveLength(8);
    expect(fresh.filter(inClaim)).toHaveLength(48);
  });

  it("AG+GEMM, MLP-1/2, world 2: every case within 15%", () => {
    const rows = group("AG+GEMM", 2);
    expect(rows).toHaveLength(12);
    expect(meanAbsError(rows)).toBeLessThan(0.065);
    expect(maxAbs(rows)).toBeLessThan(0.1);
    expect(within(rows)).toBe(12);
  });

  it("AG+GEMM, MLP-1/2, world 4: the documented misses (the runs disagree with each other by up to 1.9×)", () => {
    const rows = group("AG+GEMM", 4);
    expect(rows).toHaveLength(14);
    expect(meanAbsError(rows)).toBeLessThan(0.145);
    expect(maxAbs(rows)).toBeLessThan(0.59);
    expect(within(rows)).toBeGreaterThanOrEqual(10);
    // x3 and x4, the last runs, are within 15% throughout.
    for (const r of rows.filter((x) => x.file.startsWith("x3") || x.file.startsWith("x4"))) expect(Math.abs(r.error)).toBeLessThan(0.15);
  });

  it("GEMM+RS copy engine, MLP-1/2, world 2: every case within 15%", () => {
    const rows = group("GEMM+RS ce", 2);
    expect(rows).toHaveLength(8);
    expect(meanAbsError(rows)).toBeLessThan(0.065);
    expect(maxAbs(rows)).toBeLessThan(0.105);
    expect(within(rows)).toBe(8);
  });

  it("GEMM+RS copy engine, MLP-1/2, world 4: MLP-1 predicted too fast in every run but x1 (by up to 28% in x4)", () => {
    const rows = group("GEMM+RS ce", 4);
    expect(rows).toHaveLength(14);
    expect(meanAbsError(rows)).toBeLessThan(0.12);
    expect(maxAbs(rows)).toBeLessThan(0.29);
    expect(within(rows)).toBeGreaterThanOrEqual(10);
    for (const r of rows.filter((x) => x.mlp === 2)) expect(Math.abs(r.error)).toBeLessThan(0.15);
    for (const r of rows.filter((x) => x.file.startsWith("x1"))) expect(Math.abs(r.error)).toBeLessThan(0.065);
  });

  it("the summary covers AG+GEMM and GEMM+RS ce at worlds 2 and 4", () => {
    expect(summarize(fresh.filter(inClaim)).map((s) => `${s.operator} w${s.world}`)).toEqual([
      "AG+GEMM w2",
      "AG+GEMM w4",
      "GEMM+RS ce w2",
      "GEMM+RS ce w4",
    ]);
  });

  it("MLP-3…6 (x2): AG+GEMM and GEMM+RS ce under 4.5% on average, one AG+GEMM case beyond 15%", () => {
    const wider = fresh.filter((r) => r.mlp > 2);
    expect(wider).toHaveLength(48);
    const ag = wider.filter((r) => r.operator === "AG+GEMM");
    const ce = wider.filter((r) => r.operator === "GEMM+RS ce");
    expect(meanAbsError(ag)).toBeLessThan(0.045);
    expect(maxAbs(ag)).toBeLessThan(0.165);
    expect(within(ag)).toBeGreaterThanOrEqual(15);
    expect(meanAbsError(ce)).toBeLessThan(0.045);
    expect(maxAbs(ce)).toBeLessThan(0.075);
  });

  it("SM-push GEMM+RS: fitted on x2, tested on x1 and x3", () => {
    const sm = fresh.filter((r) => r.operator === "GEMM+RS sm");
    const x1 = sm.filter((r) => r.file.startsWith("x1"));
    const x2 = sm.filter((r) => r.file.startsWith("x2"));
    const x3 = sm.filter((r) => r.file.startsWith("x3"));
    expect(x1).toHaveLength(4);
    expect(x2).toHaveLength(24);
    expect(x3).toHaveLength(8);
    expect(meanAbsError(x3)).toBeLessThan(0.07);
    expect(maxAbs(x3)).toBeLessThan(0.12);
    expect(meanAbsError(x1)).toBeLessThan(0.045);
    expect(maxAbs(x1)).toBeLessThan(0.065);
    expect(meanAbsError(x2)).toBeLessThan(0.06);
    expect(maxAbs(x2)).toBeLessThan(0.145);
  });
});

describe("model vs suite-2026-11-22 (earlier code; AG+GEMM in-sample for copyBandwidthUnderCompute)", () => {
  const old = suiteComparisons();

  it("AG+GEMM at worlds 2/4/8", () => {
    const ag = old.filter((r) => r.operator === "AG+GEMM");
    expect(ag).toHaveLength(12);
    expect(meanAbsError(ag)).toBeLessThan(0.07);
    // One case (MLP-2, world 4, split 1) at 15.5% since the Triton GEMM is calibrated on the kernel alone.
    for (const r of ag) expect(Math.abs(r.error)).toBeLessThan(0.16);
    expect(ag.filter((r) => Math.abs(r.error) < 0.15)).toHaveLength(11);
  });

  it("GEMM+RS copy engine with the scalar rs-reduce, world 2", () => {
    const ce = old.filter((r) => r.operator === "GEMM+RS ce");
    expect(ce).toHaveLength(4);
    expect(meanAbsError(ce)).toBeLessThan(0.085);
    expect(maxAbs(ce)).toBeLessThan(0.165);
    expect(old.some((r) => r.operator === "GEMM+RS sm")).toBe(false);
  });
});
