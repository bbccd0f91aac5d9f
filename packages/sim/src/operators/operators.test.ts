import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { H100_SXM, H200_SXM, type HardwareModel } from "../simulate/hardware.js";
import { SimulateError } from "../simulate/errors.js";
import { ATTENTION_BODY, ATTENTION_SOURCE, MOE_BODY, MOE_ROUTING_BLOCKS, MOE_RS_BODY, MOE_RS_SOURCE, MOE_SOURCE } from "./calibration.js";
import { attentionComputeMs, predictAgAttention } from "./attention.js";
import { MOE_DEFAULT_TILING, moeBlocks, moeComputeMs, moeProgramsPerSm, moeRouting, predictAgMoe } from "./moe.js";
import { moeRsProducerMs, predictMoeRs } from "./moe-rs.js";
import { GEMM_OPERATORS, predictGemmOperator } from "./gemm.js";
import type { OperatorPrediction } from "./prediction.js";

const repoFile = (path: string): unknown => JSON.parse(readFileSync(new URL(`../../../../${path}`, import.meta.url), "utf8"));

/** A model whose copies run at full speed beside compute and do not slow it: overlap can only win there. */
const NO_CONTENTION: HardwareModel = {
  ...H200_SXM,
  name: "no-contention",
  contention: { copySlowdown: 0, copyBandwidthUnderCompute: 1 },
};

const EPS = 1e-9;

function checkBounds(p: OperatorPrediction): void {
  expect(p.overlappedMs).toBeGreaterThanOrEqual(Math.max(p.computeMs, p.commMs) - EPS);
  expect(p.nonOverlappedMs).toBeCloseTo(p.computeMs + p.commMs, 9);
  expect(p.bound).toBe(p.computeMs >= p.commMs ? "compute" : "communication");
}

describe("calibration fits the committed measurements", () => {
  it("attention body: predicted vs measured within the stated error", () => {
    const data = repoFile(ATTENTION_SOURCE) as {
      world: number;
      cases: { S: number; heads: number; headDim: number; causal: boolean; best: string; ms: Record<string, number> }[];
    };
    expect(data.cases.length).toBe(16);
    const errs = data.cases.map((c) => {
      // The measured shapes are rank world-1's (the last S/W queries, lower-right causal).
      const p = { seq: c.S, heads: c.heads, headDim: c.headDim, causal: c.causal, world: data.world };
      return Math.abs(attentionComputeMs(H100_SXM, p, data.world - 1) / c.ms[c.best]! - 1);
    });
    expect(Math.max(...errs)).toBeLessThanOrEqual(ATTENTION_BODY.maxError);
    expect(errs.reduce((a, b) => a + b, 0) / errs.length).toBeLessThanOrEqual(ATTENTION_BODY.meanError);
  });

  it("MoE body: predicted vs measured within the stated error at each shape's tuned tiling and the measured routing's blocks", () => {
    type Run = {
      rows: { shape: string; S: number; H: number; I_per_rank: number; E: number; topk: number; cases: Record<string, { ms: number }> }[];
    };
    const runs = MOE_SOURCE.map((f) => repoFile(f) as Run);
    const blocks = repoFile(MOE_ROUTING_BLOCKS) as { blocks: Record<string, Record<string, number>> };
    const median = (xs: number[]): number => {
      const v = [...xs].sort((x, y) => x - y);
      const h = Math.floor(v.length / 2);
      return v.length % 2 === 1 ? v[h]! : (v[h - 1]! + v[h]!) / 2;
    };
    const tilings = new Set<string>();
    for (const [i, r] of runs[0]!.rows.entries()) {
      // "p1 tuned emitted 128x256x64 g8 w8 s4": what `ovl emit ag-moe` compiled for the shape.
      const name = Object.keys(r.cases).find((c) => c.startsWith("p1 tuned emitted "))!;
      const [, BM, BN, BK, warps, stages] = /(\d+)x(\d+)x(\d+) g\d+ w(\d+) s(\d+)$/.exec(name)!.map(Number);
      const tiling = { BM: BM!, BN: BN!, BK: BK!, warps: warps!, stages: stages! };
      tilings.add(`${BM}x${BN}`);
      const measured = median(runs.map((run) => run.rows[i]!.cases[name]!.ms));
      const p = { tokens: r.S, hidden: r.H, intermediate: r.I_per_rank * 8, experts: r.E, topk: r.topk, world: 8 };
      // The measured routing's blocks (at MoE-1/4 they sit at the SM count: a mean over other routings would not do).
      const drawn = blocks.blocks[r.shape]![String(tiling.BM)]!;
      const ms = moeComputeMs(H100_SXM, p, drawn, tiling);
      // Another uniform routing of the same shape has about as many blocks.
      expect(Math.abs(moeBlocks(moeRouting({ ...p, seed: 2 }), r.E, tiling.BM).length / drawn - 1), r.shape).toBeLessThan(0.02);
      expect(Math.abs(ms / measured - 1), r.shape).toBeLessThanOrEqual(MOE_BODY.maxError);
    }
    expect(tilings.size).toBeGreaterThan(1);
  });

  it("MoE body: small tiles share an SM (shared memory, warps, the cap), the default tile has one to itself", () => {
    expect(moeProgramsPerSm(MOE_DEFAULT_TILING)).toBe(1);
    expect(moeProgramsPerSm({ BM: 128, BN: 128, BK: 64, stages: 3, warps: 8 })).toBe(2);
    expect(moeProgramsPerSm({ BM: 64, BN: 64, BK: 32, stages: 3, warps: 4 })).toBe(MOE_BODY.maxProgramsPerSm);
    const p = { tokens: 8192, hidden: 2048, intermediate: 1536, experts: 32, topk: 2, world: 8 };
    expect(() => moeComputeMs(H100_SXM, p, 100, { ...MOE_DEFAULT_TILING, BN: 0 })).toThrow(/tiling BN/);
  });
});

describe("moe-rs calibration", () => {
  const data = repoFile(MOE_RS_SOURCE) as {
    rows: { shape: string; S: number; H: number; I_per_rank: number; E: number; topk: number; cases: Record<string, { ms: number }> }[];
  };
  const cases = data.rows.map((r) => {
    const p = { tokens: r.S, hidden: r.H, intermediate: r.I_per_rank * 8, experts: r.E, topk: r.topk, world: 8 };
    const blocks = [1, 2, 3, 4].map((seed) => moeBlocks(moeRouting({ ...p, seed }), r.E, MOE_RS_BODY.tile.BM).length);
    return { r, p, blocks };
  });
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b) / xs.length;

  it("prices both producers within the stated error (seeded uniform routings)", () => {
    expect(cases.length).toBe(6);
    for (const { r, p, blocks } of cases) {
      const ws = mean(blocks.map((b) => moeRsProducerMs(H100_SXM, p, b, "launch")));
      const tile = mean(blocks.map((b) => moeRsProducerMs(H100_SXM, p, b, "tile")));
      expect(Math.abs(ws / r.cases["emitted ws-128x256x64 w4 s4"]!.ms - 1), r.shape).toBeLessThanOrEqual(MOE_RS_BODY.launch.maxError);
      expect(Math.abs(tile / r.cases["emitted tile-128x256x64 w8 s4"]!.ms - 1), r.shape).toBeLessThanOrEqual(MOE_RS_BODY.perTile.maxError);
    }
  });

  it("prices the permute + producer + notify chain within 15% at world 1 (nothing to pull)", () => {
    for (const { r, p } of cases) {
      // At world 1 the TopK-sum is the one part of the launch chain the measured chain lacks.
      const one = predictMoeRs({ ...p, intermediate: r.I_per_rank, world: 1, seed: 1 }, { hardware: H100_SXM, slabsPerRank: 1 });
      const topkSum = MOE_RS_BODY.smallKernelUs * 1e-3 + ((r.S * r.topk * r.H * 2 + r.S * r.H * 2) / (H100_SXM.hbmGBps * 1e9)) * 1e3;
      const chain = one.overlappedMs - one.commMs - topkSum;
      expect(Math.abs(chain / r.cases["emitted+permute+notify ws-128x256x64 w4 s4"]!.ms - 1), r.shape).toBeLessThanOrEqual(0.15);
    }
  });
});

describe("moe-rs", () => {
  const moe = fc.record({
    hidden: fc.constantFrom(1024, 2048, 4096),
    experts: fc.constantFrom(4, 8, 32),
    topk: fc.integer({ min: 1, max: 4 }),
    world: fc.constantFrom(2, 4, 8),
    notifies: fc.constantFrom("tile" as const, "launch" as const),
  });
  const problem = (x: { hidden: number; experts: number; topk: number; world: number }) => ({
    tokens: 2048,
    hidden: x.hidden,
    intermediate: 512 * x.world,
    experts: x.experts,
    topk: Math.min(x.topk, x.experts),
    world: x.world,
  });

  it("is bounded by compute and pulls; per launch nothing overlaps, per tile at most their sum", () => {
    fc.assert(
      fc.property(moe, (x) => {
        const p = predictMoeRs(problem(x), { hardware: H100_SXM, notifies: x.notifies });
        checkBounds(p);
        if (x.notifies === "launch") expect(p.overlappedMs).toBeGreaterThanOrEqual(p.nonOverlappedMs - EPS);
        else expect(p.overlappedMs).toBeLessThanOrEqual(p.nonOverlappedMs + EPS);
      }),
      { numRuns: 20 },
    );
  });

  it("per launch pulls k times fewer bytes: the pulls do not grow with top-k", () => {
    fc.assert(
      fc.property(moe, (x) => {
        const p = problem({ ...x, experts: 8 });
        const one = predictMoeRs({ ...p, topk: 1 }, { hardware: H100_SXM, notifies: x.notifies });
        const four = predictMoeRs({ ...p, topk: 4 }, { hardware: H100_SXM, notifies: x.notifies });
        if (x.notifies === "launch") expect(four.commMs).toBeCloseTo(one.commMs, 9);
        else expect(four.commMs).toBeGreaterThan(3 * one.commMs - (H100_SXM.reduceKernel?.launchUs ?? 0) * 1e-3 * 3);
      }),
      { numRuns: 12 },
    );
  });

  it("refuses a slab split that does not divide the tokens per rank", () => {
    expect(() =>
      predictMoeRs({ ...problem({ hidden: 1024, experts: 8, topk: 2, world: 4 }) }, { hardware: H100_SXM, slabsPerRank: 3 }),
    ).toThrow(/slabsPerRank 3/);
  });
});

describe("ag-attention", () => {
  const attn = fc.record({
    seqK: fc.constantFrom(8, 16, 32),
    heads: fc.constantFrom(8, 32, 64),
    causal: fc.boolean(),
    world: fc.constantFrom(2, 4, 8),
  });

  it("overlapped is at least max(compute, comm) and, without contention, at most their sum", () => {
    fc.assert(
      fc.property(attn, ({ seqK, heads, causal, world }) => {
        const p = { seq: seqK * 1024, heads, headDim: 128, causal, world };
        checkBounds(predictAgAttention(p, { hardware: H100_SXM }));
        const free = predictAgAttention(p, { hardware: NO_CONTENTION });
        checkBounds(free);
        expect(free.overlappedMs).toBeLessThanOrEqual(free.nonOverlappedMs + EPS);
      }),
      { numRuns: 12 },
    );
  });

  it("compute and comm grow with the sequence; causal halves the work of the average rank", () => {
    fc.assert(
      fc.property(attn, ({ seqK, heads, causal, world }) => {
        const p = { seq: seqK * 1024, heads, headDim: 128, causal, world };
        const a = predictAgAttention(p, { hardware: H200_SXM });
        const b = predictAgAttention({ ...p, seq: 2 * p.seq }, { hardware: H200_SXM });
        expect(b.computeMs).toBeGreaterThan(a.computeMs);
        expect(b.commMs).toBeGreaterThan(a.commMs);
        const L = ATTENTION_BODY.launchUs * 1e-3;
        const full = [...Array(world).keys()].map((r) => attentionComputeMs(H200_SXM, { ...p, causal: false }, r) - L);
        const half = [...Array(world).keys()].map((r) => attentionComputeMs(H200_SXM, { ...p, causal: true }, r) - L);
        const scale = ATTENTION_BODY.causalEfficiency / ATTENTION_BODY.efficiency;
        const ratio = half.reduce((x, y) => x + y) / full.reduce((x, y) => x + y);
        expect(ratio * scale).toBeCloseTo(0.5, 9);
      }),
      { numRuns: 8 },
    );
  });

  it("refuses a sequence the ranks cannot split", () => {
    expect(() => predictAgAttention({ seq: 1000, heads: 8, headDim: 128, causal: false, world: 3 }, { hardware: H100_SXM })).toThrow(
      SimulateError,
    );
  });
});

describe("ag-moe", () => {
  const moe = fc.record({
    hidden: fc.constantFrom(1024, 2048, 4096),
    experts: fc.constantFrom(4, 8, 32),
    topk: fc.constantFrom(1, 2, 4),
    world: fc.constantFrom(2, 4, 8),
    routing: fc.constantFrom("balanced" as const, "random" as const),
    seed: fc.integer({ min: 1, max: 1000 }),
  });

  it("routings put every token on topk distinct experts; balanced gives equal groups", () => {
    fc.assert(
      fc.property(moe, ({ experts, topk, world, routing, seed }) => {
        const p = { tokens: 1024, hidden: 256, intermediate: 512, experts, topk, world, routing, seed };
        const ids = moeRouting(p);
        expect(ids.length).toBe(1024);
        for (const t of ids) expect(new Set(t).size).toBe(topk);
        if (routing === "balanced") {
          const counts = new Array<number>(experts).fill(0);
          for (const t of ids) for (const e of t) counts[e]!++;
          expect(new Set(counts).size).toBe(1);
        }
        const blocks = moeBlocks(ids, experts, 128);
        for (const b of blocks) expect(b.lastToken).toBeGreaterThanOrEqual(b.firstToken);
        expect(blocks.length).toBeGreaterThanOrEqual(Math.ceil((1024 * topk) / 128));
      }),
      { numRuns: 20 },
    );
  });

  it("overlapped is at least max(compute, comm) and, without contention, at most their sum", () => {
    fc.assert(
      fc.property(moe, ({ hidden, experts, topk, world, routing, seed }) => {
        const p = { tokens: 4096, hidden, intermediate: 2048, experts, topk, world, routing, seed };
        checkBounds(predictAgMoe(p, { hardware: H100_SXM }));
        const free = predictAgMoe(p, { hardware: NO_CONTENTION });
        checkBounds(free);
        expect(free.overlappedMs).toBeLessThanOrEqual(free.nonOverlappedMs + EPS);
      }),
      { numRuns: 12 },
    );
  });

  it("compute grows with hidden and topk, comm with hidden", () => {
    fc.assert(
      fc.property(moe, ({ hidden, experts, world }) => {
        const p = { tokens: 4096, hidden, intermediate: 2048, experts, topk: 1, world, routing: "balanced" as const };
        const a = predictAgMoe(p, { hardware: H100_SXM });
        const b = predictAgMoe({ ...p, hidden: 2 * hidden }, { hardware: H100_SXM });
        const c = predictAgMoe({ ...p, topk: Math.min(experts, 4) }, { hardware: H100_SXM });
        expect(b.computeMs).toBeGreaterThan(a.computeMs);
        expect(b.commMs).toBeGreaterThan(a.commMs);
        expect(c.computeMs).toBeGreaterThanOrEqual(a.computeMs);
      }),
      { numRuns: 8 },
    );
  });

  it("refuses a routing with an expert out of range", () => {
    const p = { tokens: 4, hidden: 256, intermediate: 512, experts: 4, topk: 1, world: 2 };
    expect(() => predictAgMoe({ ...p, routing: [[0], [1], [4], [2]] }, { hardware: H100_SXM })).toThrow(/expert ids in 0..3/);
  });
});

describe("GEMM operators", () => {
  it("every operator: overlapped at least max(compute, comm); per-rank compute shrinks with world", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...GEMM_OPERATORS),
        fc.constantFrom(2048, 4096),
        fc.constantFrom(4096, 8192),
        fc.constantFrom(2, 4),
        (operator, H, I, world) => {
          const ag = operator === "ag-gemm" || operator === "a2a-gemm";
          const shape = (w: number) => ({ operator, M: 8192, N: ag ? I / w : H, K: ag ? H : I / w, world: w });
          const a = predictGemmOperator(shape(world), { hardware: H200_SXM });
          const b = predictGemmOperator(shape(2 * world), { hardware: H200_SXM });
          checkBounds(a);
          checkBounds(b);
          expect(b.computeMs).toBeLessThan(a.computeMs);
        },
      ),
      { numRuns: 10 },
    );
  });

  it("refuses rows that do not cover whole tiles", () => {
    expect(() => predictGemmOperator({ operator: "ag-gemm", M: 1000, N: 512, K: 512, world: 2 }, { hardware: H100_SXM })).toThrow(
      /multiple of 128/,
    );
  });
});
