import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { TARGETS } from "@ovl/primitives";
import {
  COMPUTE_BODIES,
  computeKey,
  computeMeasurementSet,
  computeMisfit,
  computeModel,
  computeSharedBytes,
  predictComputeMs,
  rankComputeConfigs,
  TuneError,
  type ComputeConfig,
  type ComputeProblem,
} from "./index.js";

const MODEL = computeModel("h100");
const AG: ComputeProblem = { role: "consumer", M: 8192, N: 2752, K: 4096, dtype: "bf16" };
const RS: ComputeProblem = { role: "producer", M: 8192, N: 4096, K: 1376, dtype: "bf16" };
const base = (c: Partial<ComputeConfig> = {}): ComputeConfig => ({
  body: "gemm_tma_persistent",
  BM: 128,
  BN: 256,
  BK: 64,
  groupM: 8,
  numStages: 3,
  numWarps: 8,
  ...c,
});

describe("compute configurations", () => {
  it("count shared memory as the sm_90a compiles do (operand ring + epilogue staging, ±2 KiB)", () => {
    // metadata.shared of the AOT compiles (triton 3.6, sm_90a) of the bodies at these configs.
    const compiled: [ComputeConfig, number][] = [
      [base(), 213016],
      [base({ body: "gemm_tma_persistent_flat", numStages: 4 }), 229408],
      [base({ BN: 128, numStages: 4, numWarps: 4 }), 163872],
      [base({ body: "gemm_producer", numStages: 4 }), 196640],
    ];
    for (const [c, bytes] of compiled) expect(Math.abs(computeSharedBytes(c) - bytes)).toBeLessThan(2048);
  });

  it("prune what does not fit a block's shared memory or spills its accumulators", () => {
    expect(computeMisfit(base({ numStages: 4 }), "bf16", MODEL)).toMatch(/shared memory/);
    expect(computeMisfit(base({ numWarps: 4 }), "bf16", MODEL)).toMatch(/accumulator registers/);
    expect(computeMisfit(base(), "bf16", MODEL)).toBeUndefined();
    expect(MODEL.sharedBytesPerBlock).toBe(TARGETS.h100.sharedBytesPerBlock);
  });

  it("rank every fitting configuration of the role's bodies, fastest first", () => {
    const { ranked, pruned } = rankComputeConfigs(AG);
    expect(ranked.length).toBeGreaterThan(50);
    expect(pruned.length).toBeGreaterThan(0);
    expect(ranked.every((r, i) => i === 0 || ranked[i - 1]!.predictedMs <= r.predictedMs)).toBe(true);
    const consumers = COMPUTE_BODIES.filter((b) => b.role === "consumer").map((b) => b.name);
    expect(new Set(ranked.map((r) => r.config.body))).toEqual(new Set(consumers));
    expect(rankComputeConfigs(RS).ranked.every((r) => r.config.body.startsWith("gemm_producer"))).toBe(true);
    expect(() => rankComputeConfigs({ ...AG, K: 0 })).toThrow(TuneError);
  });

  it("price wave quantisation: a tile count just over a multiple of the SMs costs a whole extra round", () => {
    // M×256 at 128×256: M/128 tiles over 132 SMs; 264 tiles are two rounds, 265 three.
    const at = (blocks: number) => predictComputeMs({ ...AG, M: 128 * blocks, N: 256 }, base(), MODEL);
    expect(at(265)).toBeGreaterThan(at(264) * 1.3);
    expect(at(264)).toBeCloseTo(at(263), 6);
  });

  it("price a stream-K tail: the last wave's tiles in pieces along K, paid in partial sums", () => {
    // 8192×3696 at 128×256: 960 tiles, 7 whole rounds and 36 tiles over 132 SMs: 3 pieces each.
    const p: ComputeProblem = { ...AG, N: 3696, K: 8192 };
    const whole = predictComputeMs(p, base(), MODEL);
    const sk = predictComputeMs(p, base({ body: "gemm_tma_persistent_streamk" }), MODEL);
    expect(sk).toBeLessThan(whole * (7.5 / 8));
    expect(sk).toBeGreaterThan(whole * (7.3 / 8));
    // No tail (8 × 132 tiles), or one piece per tile at most (a tail of 100 tiles): the same
    // rounds (the half-tile stores cost the epilogue a little more).
    const ratio = (q: ComputeProblem) =>
      predictComputeMs(q, base({ body: "gemm_tma_persistent_streamk" }), MODEL) / predictComputeMs(q, base(), MODEL);
    for (const q of [
      { ...p, M: 128 * 132, N: 2048 },
      { ...p, M: 128 * 232, N: 256 },
    ]) {
      expect(ratio(q)).toBeGreaterThanOrEqual(1);
      expect(ratio(q)).toBeLessThan(1.01);
    }
  });

  it("property: a stream-K tail never costs more than the whole last wave it replaces", () => {
    const dim = fc.integer({ min: 1, max: 64 }).map((x) => x * 128);
    const sk = rankComputeConfigs(AG).ranked.filter((r) => r.config.body === "gemm_tma_persistent_streamk");
    fc.assert(
      fc.property(dim, dim, dim, fc.constantFrom(...sk.slice(0, 40)), (M, N, K, r) => {
        const p = { ...AG, M, N, K };
        expect(predictComputeMs(p, r.config, MODEL)).toBeLessThanOrEqual(predictComputeMs(p, r.config, MODEL, { wholeTail: true }));
      }),
    );
  });

  it("property: more work never predicts less time (whole-wave bodies: a stream-K cut adapts to the tail)", () => {
    const dim = fc.integer({ min: 1, max: 64 }).map((x) => x * 128);
    const whole = rankComputeConfigs(AG).ranked.filter((r) => r.config.body !== "gemm_tma_persistent_streamk");
    fc.assert(
      fc.property(dim, dim, dim, fc.constantFrom(...whole.slice(0, 40)), (M, N, K, r) => {
        const p = { ...AG, M, N, K };
        const t = predictComputeMs(p, r.config, MODEL);
        expect(predictComputeMs({ ...p, K: K + 128 }, r.config, MODEL)).toBeGreaterThanOrEqual(t);
        expect(predictComputeMs({ ...p, N: N + 128 }, r.config, MODEL)).toBeGreaterThanOrEqual(t);
      }),
    );
  });

  it("measure the model's best k by kernel shape, every body's best and other groupings of the best", () => {
    const { ranked } = rankComputeConfigs(AG);
    const set = computeMeasurementSet(ranked, 12, { groupM: [8, 4, 16], groupVariants: 2 });
    const keys = set.map((r) => r.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toContain(ranked[0]!.key);
    for (const body of ["gemm_tma_persistent", "gemm_tma_persistent_flat", "gemm_tma_persistent_streamk"])
      expect(set.some((r) => r.config.body === body)).toBe(true);
    const best = set[0]!.config;
    for (const g of [4, 16]) expect(keys).toContain(computeKey({ ...best, groupM: g }));
    // Shapes contribute their shallowest best ring and one stage deeper, not every depth that ties.
    const shapes = new Map<string, number[]>();
    for (const r of set.filter((x) => x.config.groupM === 8)) {
      const k = `${r.config.body} ${r.config.BM}x${r.config.BN}x${r.config.BK} w${r.config.numWarps}`;
      shapes.set(k, [...(shapes.get(k) ?? []), r.config.numStages]);
    }
    for (const stages of shapes.values()) expect(stages.length).toBeLessThanOrEqual(2);
  });
});
