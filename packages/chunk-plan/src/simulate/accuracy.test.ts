import { describe, expect, it } from "vitest";
import { baselineComparisons, meanAbsError, suiteComparisons } from "./accuracy.test-util.js";

// Guards the calibration against regressions; the errors themselves are reported in
// docs/simulate.md. Thresholds are what the current model reaches, not the 15%
// target for overlapped kernels, which needs new GPU runs to confirm.
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

  it("predicts ovl's AG+GEMM kernels within the errors documented", () => {
    const ag = suiteComparisons().filter((r) => r.name.includes("_ag_gemm"));
    expect(ag).toHaveLength(12);
    expect(meanAbsError(ag)).toBeLessThan(0.25);
  });
});
