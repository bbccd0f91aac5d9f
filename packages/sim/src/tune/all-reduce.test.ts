import { describe, expect, it } from "vitest";
import { simulate } from "../simulate/index.js";
import { allReduceCandidates } from "./all-reduce.js";
import { candidateKey, candidatePlan, candidateSchedule, simulatorCost, type TuneSpace } from "./index.js";
import { candidateMemory } from "./memory.js";
import { parseTuneCache, serializeTuneCache, storeTune } from "./cache.js";
import { rankCandidates, tune } from "./tune.js";
import { TuneProblem, type OverlappedCandidate } from "./space.js";

const SPACE: TuneSpace = {
  splits: [1, 2],
  backends: ["copy-engine", "sm"],
  commSms: [16],
  tiles: [{ BM: 128, BN: 128, BK: 64 }],
  groupSizesM: [8],
  sequential: true,
};
const PROBLEM = TuneProblem.parse({ operator: "gemm-ar", M: 2048, N: 1024, K: 512, world: 4 });
const MEMORY = { globalBytes: 80e9, sharedBytesPerBlock: 227 * 1024 };

describe("GEMM+AllReduce candidates", () => {
  it("every overlapped point as a partitioned AllReduce, the SM points also tile-wise (one chunk per m-block), then the sequential path", () => {
    const cs = allReduceCandidates(PROBLEM, SPACE);
    const over = cs.filter((c): c is OverlappedCandidate => c.path === "overlapped");
    expect(over.filter((c) => c.allReduce === "partitioned")).toHaveLength(4);
    const tw = over.filter((c) => c.allReduce === "tilewise");
    // One per (SMs, tile, swizzle), at 2048 / 4 / 128 = 4 chunks per rank.
    expect(tw).toEqual([
      { path: "overlapped", split: 4, backend: "sm", commSms: 16, tile: SPACE.tiles[0], groupSizeM: 8, allReduce: "tilewise" },
    ]);
    expect(cs.at(-1)).toEqual({ path: "sequential" });
    const keys = cs.map(candidateKey);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toContain("overlapped tilewise split=4 sm sms=16 tile=128x128x64 group=8");
  });

  it("a tile-wise candidate reduces beside the GEMM: never later than the same plan reduced after it", () => {
    const c = allReduceCandidates(PROBLEM, SPACE).find((x) => x.path === "overlapped" && x.allReduce === "tilewise") as OverlappedCandidate;
    const plan = candidatePlan(PROBLEM, c.split);
    const schedule = candidateSchedule(PROBLEM, plan, c, 132 - c.commSms);
    const after = simulate(plan, schedule, {
      hardware: "H200_SXM",
      backend: "sm",
      commSms: c.commSms,
      reduceKernel: { programs: c.commSms },
    });
    const beside = simulatorCost("H200_SXM")({ problem: PROBLEM, candidate: c, built: { plan, schedule } });
    expect(beside.latencyMs).toBeLessThanOrEqual(after.latencyMs);
    expect(plan.claim?.collective).toBe("all-reduce");
  });

  it("ranks both realisations and the non-overlapped all-reduce path, and caches the choice with its realisation", async () => {
    const { ranked, pruned } = rankCandidates(PROBLEM, { cost: simulatorCost("H200_SXM"), memory: MEMORY, space: SPACE });
    expect(pruned).toEqual([]);
    const kinds = new Set(ranked.map((r) => (r.candidate.path === "overlapped" ? r.candidate.allReduce : "sequential")));
    expect(kinds).toEqual(new Set(["partitioned", "tilewise", "sequential"]));
    for (let i = 1; i < ranked.length; i++) expect(ranked[i]!.predictedMs).toBeGreaterThanOrEqual(ranked[i - 1]!.predictedMs);
    const seq = ranked.find((r) => r.candidate.path === "sequential")!;
    expect(seq.detail?.collectiveMs).toBeGreaterThan(0);
    // Its output is all of C on every rank: more memory than GEMM+RS's slab.
    const rs = candidateMemory({ ...PROBLEM, operator: "gemm-rs" }, ranked[0]!.candidate).globalBytes;
    expect(ranked[0]!.globalBytes).toBeGreaterThan(rs);

    const result = await tune(PROBLEM, { cost: simulatorCost("H200_SXM"), memory: MEMORY, space: SPACE, device: "H200_SXM" });
    expect(result.winnerKey).toBe(ranked[0]!.key);
    const cache = parseTuneCache(
      serializeTuneCache(storeTune({ $schema: "ovl.tune-cache/v1", entries: {} }, result.cacheKey, result.entry)),
    );
    const stored = cache.entries[result.cacheKey]!;
    expect(stored.operator).toBe("gemm-ar");
    if (result.winner.path === "overlapped") expect(stored.winner).toMatchObject({ allReduce: result.winner.allReduce });
  });
});
