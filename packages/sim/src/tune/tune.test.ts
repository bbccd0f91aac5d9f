import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { simulate } from "../simulate/index.js";
import {
  candidateKey,
  candidatePlan,
  candidateSchedule,
  candidateMemory,
  chunkMisfit,
  emptyTuneCache,
  enumerateCandidates,
  HOPPER_SHARED_BYTES,
  lookupTune,
  measurementSet,
  memoryMisfit,
  parseTuneCache,
  rankCandidates,
  serializeTuneCache,
  simulatorCost,
  storeTune,
  tune,
  TuneError,
  TuneProblem,
  type Candidate,
  type CostFunction,
  type OverlappedCandidate,
  type RankedCandidate,
  type TuneCacheEntry,
  type TuneSpace,
} from "./index.js";

const SPACE: TuneSpace = {
  splits: [1, 2, 4],
  backends: ["copy-engine", "sm"],
  commSms: [8, 16],
  tiles: [
    { BM: 128, BN: 128, BK: 64 },
    { BM: 256, BN: 128, BK: 64 },
    { BM: 256, BN: 256, BK: 128 },
  ],
  groupSizesM: [1, 8],
};
const SMALL = TuneProblem.parse({ operator: "ag-gemm", M: 1024, N: 256, K: 256, world: 2 });
const ROOMY = { globalBytes: 80e9, sharedBytesPerBlock: HOPPER_SHARED_BYTES };

/** A deterministic pseudo-random cost per candidate key (FNV-1a of seed and key). */
function hashedCost(seed: number): CostFunction {
  return ({ candidate }) => {
    let h = 2166136261 ^ seed;
    for (const ch of candidateKey(candidate)) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
    return { latencyMs: 0.1 + ((h >>> 0) % 10000) / 1000 };
  };
}

/** A model where overlap costs a fixed synchronisation per chunk and hides communication only behind compute. */
function syncCostModel(perChunkMs: number): CostFunction {
  return ({ problem, candidate }) => {
    const computeMs = (2 * problem.M * problem.N * problem.K) / 800e9;
    const commMs = 0.01 + (problem.M * problem.K * 2 * (problem.world - 1)) / problem.world / 300e6;
    if (candidate.path === "sequential") return { latencyMs: computeMs + commMs };
    return { latencyMs: Math.max(computeMs, commMs) + perChunkMs * candidate.split * problem.world };
  };
}

describe("enumerateCandidates", () => {
  it("spans split × backend × SMs × tile × swizzle, plus the non-overlapped path", () => {
    const all = enumerateCandidates(SPACE);
    expect(all).toHaveLength(3 * (1 + 2) * 3 * 2 + 1);
    expect(new Set(all.map(candidateKey)).size).toBe(all.length);
    expect(all.filter((c) => c.path === "overlapped" && c.backend === "copy-engine" && c.commSms !== 0)).toEqual([]);
    expect(all.at(-1)).toEqual({ path: "sequential" });
  });

  it("refuses an empty or non-integer knob", () => {
    expect(() => enumerateCandidates({ ...SPACE, splits: [] })).toThrow(TuneError);
    expect(() => enumerateCandidates({ ...SPACE, groupSizesM: [0.5] })).toThrow(/groupSizesM/);
  });
});

describe("memory pruning", () => {
  it("counts the GEMM+RS receive slabs and the tile's pipelined shared memory", () => {
    const rs = TuneProblem.parse({ operator: "gemm-rs", M: 1024, N: 512, K: 256, world: 4 });
    const c: Candidate = {
      path: "overlapped",
      split: 1,
      backend: "copy-engine",
      commSms: 0,
      tile: { BM: 128, BN: 128, BK: 64 },
      groupSizeM: 1,
    };
    const seq = candidateMemory(rs, { path: "sequential" });
    expect(seq.globalBytes).toBe((1024 * 256 + 256 * 512 + 1024 * 512 + 256 * 512) * 2);
    const m = candidateMemory(rs, c);
    expect(m.globalBytes - seq.globalBytes).toBe(4 * 256 * 512 * 2 + 4 * (4 + 8));
    expect(m.sharedBytes).toBe(3 * (128 * 64 + 64 * 128) * 2);
    const big = { ...c, tile: { BM: 256, BN: 256, BK: 128 } };
    expect(memoryMisfit(rs, big, ROOMY)).toMatch(/KiB of shared memory/);
    expect(memoryMisfit(rs, c, { ...ROOMY, globalBytes: seq.globalBytes })).toMatch(/GB per rank/);
  });

  it("fails with nothing-fits, naming the reason, when no candidate fits", async () => {
    const err = await tune(SMALL, { cost: hashedCost(1), memory: { ...ROOMY, globalBytes: 1000 }, device: "test", space: SPACE }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TuneError);
    expect((err as TuneError).code).toBe("nothing-fits");
    expect((err as TuneError).message).toMatch(/GB per rank/);
  });
});

describe("tune", () => {
  it("chooses the cheapest candidate under the cost function among those that fit", async () => {
    const all = enumerateCandidates(SPACE);
    const bytes = all.map((c) => candidateMemory(SMALL, c).globalBytes);
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 2 ** 30 }),
        fc.integer({ min: Math.min(...bytes), max: Math.max(...bytes) }),
        fc.constantFrom(64 * 1024, 150 * 1024, HOPPER_SHARED_BYTES),
        async (seed, globalBytes, sharedBytesPerBlock) => {
          const memory = { globalBytes, sharedBytesPerBlock };
          const cost = hashedCost(seed);
          const result = await tune(SMALL, { cost, memory, device: "test", space: SPACE });
          const fits = all.filter(
            (c) => memoryMisfit(SMALL, c, memory) === undefined && (c.path === "sequential" || chunkMisfit(SMALL, c) === undefined),
          );
          const best = Math.min(...fits.map((c) => cost({ problem: SMALL, candidate: c } as never).latencyMs));
          expect(memoryMisfit(SMALL, result.winner, memory)).toBeUndefined();
          expect(result.predictedMs).toBe(best);
          expect(result.ranked.length + result.pruned.length).toBe(all.length);
          expect(result.decision).toBe(result.winner.path);
        },
      ),
      { numRuns: 12 },
    );
  });

  it("measures the best k and the baseline, keeps the fastest measured, recording failures", async () => {
    const seen: string[] = [];
    const result = await tune(SMALL, {
      cost: hashedCost(7),
      memory: ROOMY,
      device: "test",
      space: SPACE,
      topK: 3,
      measure: (c) => {
        seen.push(c.key);
        if (seen.length === 2) throw new Error("device busy");
        if (c.candidate.path === "sequential") return 20; // the baseline is slower than every overlapped candidate
        return 10 - seen.length; // the third measured is the fastest
      },
    });
    const overlapped = result.ranked.filter((r) => r.candidate.path === "overlapped");
    expect(seen).toEqual([...overlapped.slice(0, 3).map((r) => r.key), "sequential"]);
    expect(result.measured.map((m) => m.error ?? m.measuredMs)).toEqual([9, "device busy", 7, 20]);
    expect(result.winnerKey).toBe(seen[2]);
    expect(result.measuredMs).toBe(7);
    expect(result.message).toContain("measured");
  });

  it("chooses the non-overlapped path for small shapes under a model where overlap loses, and says so", async () => {
    const model = syncCostModel(0.02);
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("ag-gemm" as const, "gemm-rs" as const),
        fc.constantFrom(2, 4),
        fc.integer({ min: 1, max: 2 }),
        fc.constantFrom(128, 256),
        fc.constantFrom(128, 256),
        async (operator, world, blocks, N, K) => {
          const small = await tune(
            { operator, M: world * 128 * blocks, N, K, world },
            { cost: model, memory: ROOMY, device: "test", space: SPACE },
          );
          expect(small.decision).toBe("sequential");
          expect(small.winner).toEqual({ path: "sequential" });
          expect(small.message).toMatch(/overlap loses.*non-overlapped path/);
        },
      ),
      { numRuns: 10 },
    );
    const large = await tune(
      { operator: "ag-gemm", M: 8192, N: 2752, K: 4096, world: 4 },
      { cost: model, memory: ROOMY, device: "test", space: SPACE },
    );
    expect(large.decision).toBe("overlapped");
    expect(large.message).toMatch(/overlapping wins/);
  });

  it("ranks with the simulator: each prediction is simulate()'s latency for that candidate, as the emitted Triton kernel", async () => {
    const result = await tune(SMALL, {
      cost: simulatorCost("H200_SXM"),
      memory: ROOMY,
      device: "H200_SXM",
      space: { ...SPACE, splits: [1, 2] },
    });
    const top = result.ranked.find((r) => r.candidate.path === "overlapped")!;
    const c = top.candidate as OverlappedCandidate;
    const plan = candidatePlan(SMALL, c.split);
    const sim = simulate(plan, candidateSchedule(SMALL, plan, c, 132 - c.commSms), {
      hardware: "H200_SXM",
      backend: c.backend,
      commSms: c.commSms,
      computeKernel: { kind: "triton" },
    });
    expect(top.predictedMs).toBe(sim.latencyMs);
    expect(top.detail?.boundMs).toBe(sim.boundMs);
    expect(result.ranked.map((r) => r.predictedMs)).toEqual([...result.ranked.map((r) => r.predictedMs)].sort((a, b) => a - b));
  });

  it("returns a cache hit without pricing anything", async () => {
    const first = await tune(SMALL, { cost: hashedCost(3), memory: ROOMY, device: "H200_SXM", space: SPACE });
    const cache = storeTune(emptyTuneCache(), first.cacheKey, first.entry);
    const again = await tune(SMALL, {
      cost: () => {
        throw new Error("the cache should have answered");
      },
      memory: ROOMY,
      device: "H200_SXM",
      cache: parseTuneCache(serializeTuneCache(cache)),
    });
    expect(again.fromCache).toBe(true);
    expect(again.winner).toEqual(first.winner);
    const other = await tune({ ...SMALL, world: 4 }, { cost: hashedCost(3), memory: ROOMY, device: "H200_SXM", space: SPACE, cache });
    expect(other.fromCache).toBe(false);
  });

  it("refuses a bad problem with bad-problem", () => {
    expect(() => rankCandidates({ operator: "ag-gemm", M: 0, N: 1, K: 1, world: 2 }, { cost: hashedCost(0), memory: ROOMY })).toThrow(
      /problem.M/,
    );
  });
});

describe("tune cache", () => {
  const tile = fc.record({ BM: fc.constantFrom(64, 128, 256), BN: fc.constantFrom(64, 128, 256), BK: fc.constantFrom(32, 64) });
  const winner = fc.oneof(
    fc.constant({ path: "sequential" as const }),
    fc.record({
      path: fc.constant("overlapped" as const),
      split: fc.integer({ min: 1, max: 16 }),
      backend: fc.constantFrom("copy-engine" as const, "sm" as const),
      commSms: fc.integer({ min: 0, max: 64 }),
      tile,
      groupSizeM: fc.integer({ min: 1, max: 16 }),
    }),
  );
  const entry: fc.Arbitrary<TuneCacheEntry> = fc.record(
    {
      operator: fc.constantFrom("ag-gemm" as const, "gemm-rs" as const),
      M: fc.integer({ min: 1, max: 1 << 16 }),
      N: fc.integer({ min: 1, max: 1 << 16 }),
      K: fc.integer({ min: 1, max: 1 << 16 }),
      world: fc.integer({ min: 2, max: 64 }),
      device: fc.constantFrom("H200_SXM", "H100_SXM", "NVIDIA H200"),
      winner,
      predictedMs: fc.double({ min: 0, max: 100, noNaN: true }),
      measuredMs: fc.double({ min: 0, max: 100, noNaN: true }),
      decision: fc.constantFrom("overlapped" as const, "sequential" as const),
      message: fc.string(),
      at: fc.constant("2026-11-22T11:00:00.000Z"),
    },
    { requiredKeys: ["operator", "M", "N", "K", "world", "device", "winner", "predictedMs", "decision", "message", "at"] },
  );

  it("round-trips through JSON text, and a stored entry is found under its key", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.string({ minLength: 1 }), entry), { maxLength: 5 }), (pairs) => {
        let cache = emptyTuneCache();
        for (const [k, e] of pairs) cache = storeTune(cache, k, e);
        const back = parseTuneCache(serializeTuneCache(cache));
        expect(back).toEqual(cache);
        for (const [k] of pairs) expect(lookupTune(back, k)).toEqual(cache.entries[k]);
        // An inherited name is not an entry unless it was stored as one.
        if (!pairs.some(([k]) => k === "toString")) expect(lookupTune(back, "toString")).toBeUndefined();
      }),
      { numRuns: 50 },
    );
  });

  it("rejects text that is not a cache with bad-cache", () => {
    expect(() => parseTuneCache("{")).toThrow(TuneError);
    expect(() => parseTuneCache(JSON.stringify({ $schema: "ovl.tune-cache/v1", entries: { a: { operator: "x" } } }))).toThrow(
      /entries\.a\.operator/,
    );
  });
});

describe("measurementSet", () => {
  const rc = (split: number, groupSizeM: number, predictedMs: number, BN = 256): RankedCandidate => {
    const candidate: OverlappedCandidate = {
      path: "overlapped",
      split,
      backend: "copy-engine",
      commSms: 0,
      tile: { BM: 128, BN, BK: 64 },
      groupSizeM,
    };
    return { candidate, key: candidateKey(candidate), predictedMs, globalBytes: 0 };
  };
  it("measures the best k the model tells apart: swizzles predicted alike count once", () => {
    const ranked = [rc(2, 8, 0.5), rc(2, 16, 0.5), rc(2, 4, 0.5), rc(1, 8, 0.52), rc(2, 8, 0.53, 128), rc(4, 8, 0.6)];
    expect(measurementSet(ranked, 3).map((r) => r.key)).toEqual([ranked[0]!.key, ranked[3]!.key, ranked[4]!.key]);
    expect(measurementSet(ranked, 1)).toEqual([ranked[0]]);
    expect(measurementSet(ranked, 10)).toHaveLength(4);
  });
  it("keeps swizzles the model prices differently", () => {
    const ranked = [rc(2, 8, 0.5), rc(2, 16, 0.51)];
    expect(measurementSet(ranked, 2)).toHaveLength(2);
  });
});
