import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { MLP_SHAPES } from "../../src/index.js";
import { agMoeTiling, MLP_OPERATORS, mlpProblem, predictionRows } from "./predictions.js";
import { PREDICTION_FAMILIES, predictionsChart, predictionsJson, predictionsMarkdown, PREDICTIONS_SCHEMA } from "./report.js";
import { ATTENTION_SEQS, MOE_SHAPES } from "./suites.js";

describe("prediction suite", () => {
  const rows = predictionRows({ hardware: ["H200_SXM"], worlds: [8] });

  it("covers every operator over its suite", () => {
    const count = (op: string) => rows.filter((r) => r.operator === op).length;
    for (const op of MLP_OPERATORS) expect(count(op)).toBe(Object.keys(MLP_SHAPES).length);
    expect(count("ag-moe")).toBe(Object.keys(MOE_SHAPES).length);
    expect(count("moe-rs")).toBe(Object.keys(MOE_SHAPES).length);
    expect(count("ag-attention")).toBe(2 * ATTENTION_SEQS.length);
    expect(count("ag-attention-causal")).toBe(2 * ATTENTION_SEQS.length);
  });

  it("prices ag-moe at the tile the compiler takes for the shape (the H100's tuned entries on the H200 too)", () => {
    const moe = (name: keyof typeof MOE_SHAPES) => {
      const s = MOE_SHAPES[name];
      return { tokens: s.S, hidden: s.H, intermediate: s.I, experts: s.E, topk: s.topk, world: 8 };
    };
    expect(agMoeTiling("H200_SXM", moe("MoE-2"))).toEqual({ BM: 64, BN: 64, BK: 32, stages: 3, warps: 4 });
    expect(agMoeTiling("H100_SXM", moe("MoE-5"))).toEqual({ BM: 128, BN: 128, BK: 64, stages: 3, warps: 8 });
    expect(agMoeTiling("A100", moe("MoE-5"))).toBeUndefined();
  });

  it("every row is a consistent prediction", () => {
    for (const r of rows) {
      expect(r.world).toBe(8);
      expect(r.hardware).toBe("H200_SXM");
      expect(r.overlappedMs).toBeGreaterThanOrEqual(Math.max(r.computeMs, r.commMs) - 1e-9);
      expect(r.speedup).toBeCloseTo((r.computeMs + r.commMs) / r.overlappedMs, 9);
    }
  });

  it("the report names every row and the JSON round-trips", () => {
    const md = predictionsMarkdown(rows, "2026-01-01", ["a source"]);
    expect(md.split("\n").filter((l) => /^\| (MLP|MoE|Attn)/.test(l)).length).toBe(rows.length);
    const doc = JSON.parse(predictionsJson(rows, "2026-01-01")) as { $schema: string; rows: unknown[] };
    expect(doc.$schema).toBe(PREDICTIONS_SCHEMA);
    expect(doc.rows).toEqual(JSON.parse(JSON.stringify(rows)));
  });

  it("each family's chart draws its cases and only those", async () => {
    const svg = await predictionsChart(rows, "moe", 8, "H200_SXM");
    for (const name of Object.keys(MOE_SHAPES)) {
      expect(svg).toContain(`ag-moe ${name}`);
      expect(svg).toContain(`moe-rs ${name}`);
    }
    expect(svg).not.toContain("ag-gemm");
    expect(PREDICTION_FAMILIES.mlp).toEqual(MLP_OPERATORS);
  });

  it("MLP problems: gathers shard N, reductions shard K, and the FLOPs are the world's share", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...MLP_OPERATORS),
        fc.constantFrom(...(Object.keys(MLP_SHAPES) as (keyof typeof MLP_SHAPES)[])),
        fc.constantFrom(2, 4, 8),
        (op, name, w) => {
          const s = MLP_SHAPES[name];
          const p = mlpProblem(op, s, w);
          expect(p.M * p.N * p.K * w).toBe(s.S * s.H * s.I);
        },
      ),
    );
  });
});
