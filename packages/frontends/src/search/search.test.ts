import { describe, expect, it } from "vitest";
import { type TensorDecl, validatePlan } from "@ovl/chunk-plan";
import { analyzeProgram } from "../commir/analyze.js";
import { bufferShape, type Program } from "../commir/ir.js";
import { interpret } from "../commir/interpret.js";
import { lowerProgram } from "../commir/lower.js";
import { runLowered } from "../commir/run.js";
import { parallelize } from "../commir/transforms.js";
import { FrontendError } from "../errors.js";
import { partialSum, replicate, shard, type ShardingSpec } from "../partition/spec.js";
import { analyticCost, h100Cluster, summarize } from "./cost.js";
import { alphaBetaReshard, type OperatorDag, searchResharding } from "./reshard.js";
import {
  asyncTpGemm,
  attentionProgram,
  gemmProgram,
  ringAttention,
  signature,
  tileOuter,
  treeAttention,
  ulyssesAttention,
  uspAttention,
} from "./schedules.js";
import { containsSchedule, meshFactorisations, searchSchedules } from "./search.js";

const hw = h100Cluster(8);
const attn = attentionProgram({ heads: 4, kvHeads: 2, query: 8, context: 8 });
const gemm = gemmProgram(8, 8, 4);

function inputsOf(p: Program): Record<string, number[]> {
  return Object.fromEntries(
    p.inputs.map((name, k) => {
      const n = bufferShape(p, p.buffers.find((b) => b.name === name)!).reduce((a, b) => a * b, 1);
      return [name, Array.from({ length: n }, (_, i) => ((i * (5 + k)) % 9) - 4)];
    }),
  );
}

describe("schedule search", () => {
  it("enumerates ordered mesh factorisations", () => {
    expect(meshFactorisations(8)).toEqual([[2, 4], [4, 2], [8]]);
    expect(meshFactorisations(8, 3)).toContainEqual([2, 2, 2]);
    expect(meshFactorisations(1)).toEqual([[1]]);
  });

  const space = searchSchedules(attn, { world: 4, hardware: hw });

  it("contains ring attention, Ulysses, USP's hybrid and tree attention", () => {
    expect(containsSchedule(space, [4], signature(ringAttention(attn, 4)))).toBe(true);
    expect(containsSchedule(space, [4], signature(ulyssesAttention(attn, 4)))).toBe(true);
    expect(containsSchedule(space, [2, 2], signature(uspAttention(attn, [2, 2])))).toBe(true);
    expect(containsSchedule(space, [4], signature(treeAttention(attn, 4)))).toBe(true);
    expect(signature(uspAttention(attn, [2, 2]))).toEqual({ parallel: { 0: "h", 1: "i" }, shifts: { 1: "j" } });
  });

  it("contains AsyncTP's GEMM (N parallel, M shifted)", () => {
    const gemms = searchSchedules(gemm, { world: 4, hardware: hw });
    expect(signature(asyncTpGemm(gemm, 4))).toEqual({ parallel: { 0: "n" }, shifts: { 0: "m" } });
    expect(containsSchedule(gemms, [4], signature(asyncTpGemm(gemm, 4)))).toBe(true);
  });

  it("every ranked candidate lowers to a plan that validates and computes the operator", () => {
    for (const [base, result] of [
      [attn, space],
      [gemm, searchSchedules(gemm, { world: 4, hardware: hw })],
    ] as const) {
      const inputs = inputsOf(base);
      const want = interpret(base, inputs);
      for (const c of result.ranked) {
        const lowered = lowerProgram(c.program, c.mesh);
        expect(validatePlan(lowered.plan)).toEqual({ ok: true });
        expect(runLowered(lowered, inputs)).toEqual(want);
      }
      expect(result.ranked.length).toBeGreaterThan(10);
    }
  });

  it("ranks by cost and prunes candidates over the memory capacity", () => {
    const costs = space.ranked.map((c) => c.cost);
    expect(costs).toEqual([...costs].sort((a, b) => a - b));
    const mems = space.ranked.map((c) => c.memoryBytes).sort((a, b) => a - b);
    const capacity = mems[Math.floor(mems.length / 2)]!;
    const tight = searchSchedules(attn, { world: 4, hardware: hw, capacityBytes: capacity });
    expect(tight.pruned.length).toBeGreaterThan(0);
    expect(tight.ranked.every((c) => c.memoryBytes <= capacity)).toBe(true);
    expect(tight.pruned.every((c) => c.memoryBytes > capacity)).toBe(true);
    expect(tight.ranked.length + tight.pruned.length).toBe(space.ranked.length + space.pruned.length);
  });

  it("takes a pluggable cost model", () => {
    const byMemory = searchSchedules(attn, { world: 4, hardware: hw, costModel: (s) => s.memoryBytes });
    expect(byMemory.ranked[0]!.memoryBytes).toBe(Math.min(...byMemory.ranked.map((c) => c.memoryBytes)));
  });

  it("the analytic model: alpha-beta ring steps overlapped with compute", () => {
    const facts = analyzeProgram(ringAttention(attn, 4), [4]);
    const s = summarize(facts);
    expect(s.comm).toEqual([{ buffer: "KV", kind: "ring", level: 0, steps: 3, bytesPerStep: 2 * 2 * 2, overlapped: true }]);
    expect(s.flopsPerRank).toBe(2 * 4 * 2 * 8);
    const compute = s.flopsPerRank / hw.peakFlops;
    const ring = 3 * (hw.intra.latency + 8 / hw.intra.bandwidth);
    expect(analyticCost(s, hw)).toBeCloseTo(Math.max(compute, ring) + Math.min(compute, ring) / 4, 15);
    const tree = summarize(analyzeProgram(treeAttention(attn, 4), [4]));
    expect(tree.comm[0]).toMatchObject({ kind: "all-reduce", steps: 6, overlapped: false });
  });

  it("refuses a space past maxCandidates", () => {
    expect(() => searchSchedules(attn, { world: 8, hardware: hw, maxCandidates: 10 })).toThrow(FrontendError);
  });
});

describe("Algorithm 1: inter-operator resharding on one Llama layer", () => {
  const S = 256;
  const D = 128;
  const world = 4;
  const tensor = (name: string, cols: number): TensorDecl => ({ name, shape: [S, cols], dtype: "bf16" });
  const cost = (p: Program): number => analyticCost(summarize(analyzeProgram(p, [world])), hw);
  const gemmAlong = (m: number, n: number, k: number, axisName: "m" | "n" | "k"): number => {
    const g = gemmProgram(m, n, k);
    const t = tileOuter(g, axisName, world);
    return cost(parallelize(t.program, t.outer, 0));
  };
  const attnOp = attentionProgram({ heads: 8, query: S, context: S });
  const dag = (scale = 1): OperatorDag => ({
    ops: [
      { name: "input", output: tensor("x", D), candidates: [{ name: "sequence", execCost: 0, inputs: {}, output: [shard(0)] }] },
      {
        name: "qkv",
        output: tensor("qkv", 3 * D),
        candidates: [
          { name: "column", execCost: gemmAlong(S, 3 * D, D, "n") * scale, inputs: { x: [replicate()] }, output: [shard(1)] },
          { name: "sequence", execCost: gemmAlong(S, 3 * D, D, "m") * scale, inputs: { x: [shard(0)] }, output: [shard(0)] },
        ],
      },
      {
        name: "attention",
        output: tensor("o", D),
        candidates: [
          { name: "heads", execCost: cost(ulyssesAttention(attnOp, world)) * scale, inputs: { qkv: [shard(1)] }, output: [shard(1)] },
          { name: "ring", execCost: cost(ringAttention(attnOp, world)) * scale, inputs: { qkv: [shard(0)] }, output: [shard(0)] },
        ],
      },
      {
        name: "mlp",
        output: tensor("y", D),
        candidates: [
          { name: "row", execCost: gemmAlong(S, D, D, "k") * scale, inputs: { o: [shard(1)] }, output: [replicate()] },
          { name: "sequence", execCost: gemmAlong(S, D, D, "m") * scale, inputs: { o: [shard(0)] }, output: [shard(0)] },
        ],
      },
    ],
    edges: [
      { from: "input", to: "qkv" },
      { from: "qkv", to: "attention" },
      { from: "attention", to: "mlp" },
    ],
  });

  it("chooses the assignment minimising execution plus resharding (checked against every assignment)", () => {
    const d = dag();
    const result = searchResharding(d, { mesh: [world], hardware: hw });
    expect(result.evaluated).toBe(8);
    const reshard = alphaBetaReshard(hw);
    const costOf = (choice: Record<string, string>): number =>
      d.ops.reduce((acc, op) => {
        const c = op.candidates.find((x) => x.name === choice[op.name])!;
        const pred = d.edges.filter((e) => e.to === op.name).map((e) => d.ops.find((o) => o.name === e.from)!);
        return (
          acc +
          c.execCost +
          pred.reduce(
            (a, p) =>
              a +
              reshard(p.output, { shape: [world] }, p.candidates.find((x) => x.name === choice[p.name])!.output, c.inputs[p.output.name]!),
            0,
          )
        );
      }, 0);
    expect(result.cost).toBeCloseTo(costOf(result.choice), 15);
    expect(result.cost).toBeCloseTo(result.execCost + result.reshardCost, 15);
    for (const q of ["column", "sequence"])
      for (const a of ["heads", "ring"])
        for (const m of ["row", "sequence"]) {
          expect(result.cost).toBeLessThanOrEqual(costOf({ input: "sequence", qkv: q, attention: a, mlp: m }) + 1e-18);
        }
  });

  it("avoids resharding when it is expensive, and picks each operator's fastest sharding when it is free", () => {
    const d = dag();
    const pricey = searchResharding(d, {
      mesh: [world],
      hardware: hw,
      reshardCost: (t, m, b, a) => alphaBetaReshard(hw)(t, m, b, a) * 1e6,
    });
    expect(pricey.choice).toEqual({ input: "sequence", qkv: "sequence", attention: "ring", mlp: "sequence" });
    expect(pricey.reshardCost).toBe(0);
    const free = searchResharding(d, { mesh: [world], hardware: hw, reshardCost: () => 0 });
    for (const op of d.ops) {
      const fastest = [...op.candidates].sort((x, y) => x.execCost - y.execCost)[0]!.name;
      expect(free.choice[op.name]).toBe(fastest);
    }
  });

  it("prices a reshard by the collective it implies", () => {
    const x = tensor("x", D);
    const m = { shape: [world] };
    const shardBytes = (S / world) * D * 2;
    const gather = alphaBetaReshard(hw)(x, m, [shard(0)], [replicate()]);
    expect(gather).toBeCloseTo(3 * (hw.intra.latency + shardBytes / hw.intra.bandwidth), 15);
    const spec: ShardingSpec = [partialSum()];
    expect(alphaBetaReshard(hw)(x, m, spec, [replicate()])).toBeCloseTo(
      6 * (hw.intra.latency + (S * D * 2) / world / hw.intra.bandwidth),
      15,
    );
    expect(alphaBetaReshard(hw)(x, m, [replicate()], [shard(0)])).toBe(0);
  });
});
