// `ovl simulate` against what the emitted kernels measured: GEMM+ReduceScatter and the partitioned
// GEMM+AllReduce over SM transfers, through the torch API from CUDA graphs on four H100s, at worlds 4
// and 2 (packages/bench/results/gpu/gemm-ar-sm-h100x4-2026-11-27/run2, measured after the model's
// parameters: the SM copy law was fitted on push kernels alone, push-rate-h100x4-2026-11-27).
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { predict } from "./commands/simulate.js";
import { resolveProblem } from "./problem.js";

const RUN = join(dirname(fileURLToPath(import.meta.url)), "../../bench/results/gpu/gemm-ar-sm-h100x4-2026-11-27/run2/torch-api");
const FILES = { "gemm-rs": "gemm-rs-rs", "gemm-ar": "gemm-ar-per-program" } as const;

interface Row {
  readonly shape: string;
  readonly "ovl graph": number;
}

function errors(operator: keyof typeof FILES, world: number): { shape: string; error: number }[] {
  const rows = (JSON.parse(readFileSync(join(RUN, `${FILES[operator]}-w${world}.json`), "utf8")) as { rows: Row[] }).rows;
  return rows.map((r) => {
    const p = resolveProblem(operator, { shape: r.shape, world, backend: "sm" });
    const predicted = predict(p, "H100_SXM").sim.latencyMs;
    return { shape: r.shape, error: (predicted - r["ovl graph"]) / r["ovl graph"] };
  });
}

describe("ovl simulate against the torch API's SM-transfer operators on four H100s", () => {
  it("world 4: GEMM+RS and GEMM+AllReduce within 12% at every MLP shape", () => {
    for (const op of ["gemm-rs", "gemm-ar"] as const) {
      const e = errors(op, 4);
      expect(e).toHaveLength(6);
      for (const { shape, error } of e) expect(Math.abs(error), `${op} ${shape}`).toBeLessThan(0.12);
    }
  });

  it("world 2 (4 or 8 push SMs): no prediction too fast, none more than 30% slow, 15% off on average", () => {
    const e = [...errors("gemm-rs", 2), ...errors("gemm-ar", 2)];
    expect(e).toHaveLength(12);
    for (const { shape, error } of e) {
      expect(error, shape).toBeGreaterThan(0);
      expect(error, shape).toBeLessThan(0.3);
    }
    expect(e.reduce((a, x) => a + Math.abs(x.error), 0) / e.length).toBeLessThan(0.16);
  });
});
