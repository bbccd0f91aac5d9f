import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  allGatherRing,
  allReducePartitioned,
  allGatherSwizzle,
  applyTileArrivals,
  type ChunkPlan,
  lowerToTileSchedule,
  planSignals,
  reduceScatterDirect,
} from "@ovl/chunk-plan";
import { H200_SXM, HARDWARE_MODELS, HardwareModel, H100_SXM } from "./hardware.js";
import { allReduceOptions, simulate } from "./simulate.js";
import { SimulationResult } from "./result.js";
import { SimulateError } from "./errors.js";
import { simulateCompute } from "./compute.js";
import { gemmMs, reduceKernelGBps, reducePassMs, smCopyGBps, SM_STORE_BYTES_PER_US, streamKSplit } from "./cost.js";
import { predictBaselines } from "./baselines.js";

function agGemm(world: number, split: number, opts: { rows?: number; n?: number; ring?: boolean } = {}) {
  const rows = opts.rows ?? 8192;
  const tensor = { name: "A", shape: [rows, 4096], dtype: "bf16" } as const;
  const plan = planSignals(
    opts.ring
      ? allGatherRing({ tensor, axis: 0, mesh: [world], split })
      : allGatherSwizzle({ tensor, axis: 0, mesh: [world], split, side: "push" }),
  );
  const schedule = lowerToTileSchedule(plan, {
    tensor: "A",
    problem: { M: rows, N: opts.n ?? Math.floor(11008 / world), K: 4096 },
    tile: { BM: 128, BN: 256, BK: 64 },
    persistent: { numSms: 132 },
    groupSizeM: 8,
  });
  return { plan, schedule };
}

function gemmRs(world: number, split: number, numSms = 132) {
  const plan0 = planSignals(
    reduceScatterDirect({ tensor: { name: "C", shape: [8192, 4096], dtype: "bf16" }, axis: 0, mesh: [world], split, afterCompute: true }),
  );
  const schedule = lowerToTileSchedule(plan0, {
    tensor: "C_partial",
    problem: { M: 8192, N: 4096, K: Math.floor(11008 / world) },
    tile: { BM: 128, BN: 256, BK: 64 },
    persistent: { numSms },
    groupSizeM: 8,
  });
  return { plan: applyTileArrivals(plan0, schedule), schedule };
}

const withBandwidth = (scale: number): HardwareModel => ({
  ...H200_SXM,
  nvlink: { ...H200_SXM.nvlink, linkGBps: H200_SXM.nvlink.linkGBps * scale },
  copyEngine: { ...H200_SXM.copyEngine, bandwidthGBps: H200_SXM.copyEngine.bandwidthGBps * scale },
  smCopy: { ...H200_SXM.smCopy, bandwidthPerSmGBps: H200_SXM.smCopy.bandwidthPerSmGBps * scale },
});

const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return e instanceof SimulateError ? e.code : "other";
  }
  return undefined;
};

const noCopyLoss: HardwareModel = { ...H200_SXM, contention: { ...H200_SXM.contention, copyBandwidthUnderCompute: 1 } };

describe("simulate", () => {
  it("predicts AG+GEMM MLP-1 at 8 ranks with a well-formed result", () => {
    // No wall-clock bound here: speed is measured in benchmarks, not asserted in a unit test.
    const { plan, schedule } = agGemm(8, 2);
    const r = simulate(plan, schedule, { hardware: "H200_SXM" });
    expect(SimulationResult.parse(r)).toEqual(r);
    expect(r.ranks).toHaveLength(8);
    expect(r.latencyMs).toBeGreaterThanOrEqual(r.boundMs);
    expect(r.nonOverlappedMs).toBeCloseTo(r.computeAloneMs + r.commAloneMs, 9);
    // 7 peers × 2 chunks pushed by every rank: one transfer event each.
    expect(r.ranks[0]!.events.filter((e) => e.kind === "transfer")).toHaveLength(14);
    expect(r.ranks[0]!.events.some((e) => e.kind === "wave")).toBe(true);
    for (const e of r.ranks.flatMap((x) => x.events)) expect(e.endMs).toBeGreaterThanOrEqual(e.startMs);
  });

  it("hides the gather behind compute at 2 ranks (compute-bound MLP-1)", () => {
    const { plan, schedule } = agGemm(2, 1);
    const r = simulate(plan, schedule, { hardware: H200_SXM });
    expect(r.computeAloneMs).toBeCloseTo(gemmMs(H200_SXM, { M: 8192, N: 5504, K: 4096 }), 9);
    expect(r.speedup).toBeGreaterThan(1.1);
    expect(r.overlapRatio).toBeGreaterThan(0.5);
  });

  it("makes the GEMM wait for chunks: waits appear when communication is slow", () => {
    const { plan, schedule } = agGemm(4, 1);
    const r = simulate(plan, schedule, { hardware: withBandwidth(0.05) });
    expect(r.ranks[0]!.events.some((e) => e.kind === "wait")).toBe(true);
    expect(r.ranks[0]!.stallMs).toBeGreaterThan(0);
  });

  it("GEMM+RS: communication waits for compute and either backend pays a reduction pass after the GEMM", () => {
    const { plan, schedule } = gemmRs(2, 2);
    const ce = simulate(plan, schedule, { hardware: "H200_SXM" });
    expect(ce.role).toBe("producer");
    expect(ce.ranks[0]!.events.some((e) => e.kind === "reduce")).toBe(true);
    const first = ce.ranks[0]!.events.filter((e) => e.kind === "transfer").map((e) => e.startMs);
    expect(Math.min(...first)).toBeGreaterThan(H200_SXM.gemm.launchUs * 1e-3);
    const sm = simulate(plan, schedule, { hardware: "H200_SXM", backend: "sm", commSms: 20 });
    for (const r of [ce, sm]) {
      for (const rank of r.ranks) {
        const reduce = rank.events.find((e) => e.kind === "reduce")!;
        const lastWave = Math.max(...rank.events.filter((e) => e.kind === "wave").map((e) => e.endMs));
        expect(reduce.startMs).toBeCloseTo(lastWave, 9);
        expect(rank.latencyMs).toBeCloseTo(reduce.endMs, 9);
      }
    }
    expect(sm.latencyMs).toBeGreaterThanOrEqual(sm.boundMs);
  });

  it("SM copies drive local copies too, at the copy SMs' bandwidth (a producer's own partial copied, as kernels did before)", () => {
    const { plan, schedule } = gemmRs(2, 1);
    const own = (r: ReturnType<typeof simulate>) =>
      r.ranks[0]!.events.find((e) => e.kind === "transfer" && e.label.startsWith("own partial"))!;
    const bytes = 4096 * 4096 * 2;
    const ce = own(simulate(plan, schedule, { hardware: "H200_SXM", ownPartial: "copied" }));
    expect(ce.endMs - ce.startMs).toBeCloseTo((2 * bytes) / (H200_SXM.hbmGBps * 1e6), 9);
    for (const hardware of ["H200_SXM", "H100_SXM"] as const) {
      for (const commSms of [8, 16]) {
        const sm = own(simulate(plan, schedule, { hardware, backend: "sm", commSms, ownPartial: "copied" }));
        // Alone on its rank's copy SMs or sharing them: never faster than all of them.
        expect(sm.endMs - sm.startMs).toBeGreaterThanOrEqual(bytes / (smCopyGBps(HARDWARE_MODELS[hardware]!, commSms) * 1e6) - 1e-9);
      }
    }
  });

  it("a producer's own partial is read in place by default: its local copy moves nothing, and the launch is no longer", () => {
    const { plan, schedule } = gemmRs(2, 1);
    for (const backend of ["copy-engine", "sm"] as const) {
      const inPlace = simulate(plan, schedule, { hardware: "H100_SXM", backend });
      const copied = simulate(plan, schedule, { hardware: "H100_SXM", backend, ownPartial: "copied" });
      const own = inPlace.ranks[0]!.events.find((e) => e.kind === "transfer" && e.label.startsWith("own partial"))!;
      expect(own.endMs - own.startMs).toBeLessThan(0.01);
      // Over SM copies the copy shared the push SMs; over the copy engine it ran off the critical path.
      if (backend === "sm") expect(inPlace.latencyMs).toBeLessThan(copied.latencyMs);
      else expect(inPlace.latencyMs).toBeLessThanOrEqual(copied.latencyMs);
    }
  });

  it('a persistent producer notifying a tile from its next tile ("next-tile"; "tile" the default): transfers start no earlier, the GEMM ends when it did, the operator ends no sooner', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4),
        fc.constantFrom(1, 2, 4),
        fc.constantFrom<"copy-engine" | "sm">("copy-engine", "sm"),
        (world, split, backend) => {
          const { plan, schedule } = gemmRs(world, split);
          // Without contention the GEMM runs as fast beside the copies, so only the notify times differ.
          const hardware = { ...H200_SXM, contention: { copySlowdown: 0, copyBandwidthUnderCompute: 1 } };
          const later = simulate(plan, schedule, { hardware, backend, notifyAt: "next-tile" });
          const atTile = simulate(plan, schedule, { hardware, backend, notifyAt: "tile" });
          expect(simulate(plan, schedule, { hardware, backend }).latencyMs).toBe(atTile.latencyMs);
          const starts = (r: SimulationResult) =>
            r.ranks.flatMap((k) =>
              k.events.filter((e) => e.kind === "transfer" && !e.label.startsWith("own partial")).map((e) => e.startMs),
            );
          const [a, b] = [starts(later), starts(atTile)];
          expect(a).toHaveLength(b.length);
          a.forEach((t, i) => expect(t).toBeGreaterThanOrEqual(b[i]! - 1e-12));
          const gemmEnd = (r: SimulationResult) =>
            Math.max(...r.ranks.flatMap((k) => k.events.filter((e) => e.kind === "wave").map((e) => e.endMs)));
          expect(gemmEnd(later)).toBeCloseTo(gemmEnd(atTile), 9);
          expect(later.latencyMs).toBeGreaterThanOrEqual(atTile.latencyMs - 1e-9);
        },
      ),
      { numRuns: 12 },
    );
    // Each tile's notify one K step into its program's next tile, the last tile's when its program ends.
    fc.assert(
      fc.property(fc.constantFrom(2, 4, 8), fc.integer({ min: 8, max: 132 }), (world, sms) => {
        const { schedule } = gemmRs(world, 1, sms);
        const kSteps = Math.ceil(schedule.tiling.problem.K / schedule.tiling.tile.BK);
        const timing = simulateCompute({
          schedule,
          rank: schedule.ranks[0]!,
          tileMs: 0.02,
          startMs: 0,
          sms,
          slotReady: () => 0,
          busy: [],
          slowdown: 0,
          notifyAt: "next-tile",
        });
        const tiles = schedule.ranks[0]!.tables.tile;
        const lanes = Math.min(schedule.grid.programs, sms);
        for (let v = 0; v < tiles.length; v++) {
          const next = v + lanes; // a persistent program's next tile in the visit order
          const at = timing.notifyByTile[tiles[v]!]!;
          if (next < tiles.length) expect(at).toBeCloseTo(timing.start[next]! + (timing.end[next]! - timing.start[next]!) / kSteps, 9);
          else expect(at).toBeCloseTo(timing.end[v]!, 9);
          expect(at).toBeGreaterThanOrEqual(timing.end[v]!);
        }
      }),
      { numRuns: 10 },
    );
    // With several chunks per shard the first ones complete one K step into the next tile.
    const { plan, schedule } = gemmRs(4, 4);
    const first = (notifyAt: "tile" | "next-tile") =>
      Math.min(
        ...simulate(plan, schedule, { hardware: "H200_SXM", notifyAt })
          .ranks[0]!.events.filter((e) => e.kind === "transfer" && !e.label.startsWith("own partial"))
          .map((e) => e.startMs),
      );
    expect(first("next-tile")).toBeGreaterThan(first("tile"));
    expect(code(() => simulate(gemmRs(2, 1).plan, gemmRs(2, 1).schedule, { hardware: "H200_SXM", notifyAt: "later" as never }))).toBe(
      "bad-option",
    );
  });

  it("SM copies saturate: more SMs move more, never past the model's peak, and fewer SMs each move more", () => {
    const hw = HARDWARE_MODELS.H100_SXM!;
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 131 }), (n) => {
        expect(smCopyGBps(hw, n + 1)).toBeGreaterThan(smCopyGBps(hw, n));
        expect(smCopyGBps(hw, n)).toBeLessThan(hw.smCopy.peakGBps!);
        expect(smCopyGBps(hw, n + 1) / (n + 1)).toBeLessThan(smCopyGBps(hw, n) / n);
      }),
    );
    // Without a peak (the kernel of 2026-11-22's fit): linear.
    const linear = { ...H200_SXM, smCopy: { bandwidthPerSmGBps: 7.35, launchUs: 5 } };
    expect(smCopyGBps(linear, 16)).toBeCloseTo(16 * 7.35, 9);
  });

  it("GEMM+AllReduce over SM transfers: its AllGather half runs on every SM once the GEMM is over", () => {
    const M = 4096;
    const plan = planSignals(
      allReducePartitioned({
        tensor: { name: "C", shape: [M, 4096], dtype: "bf16" },
        src: "C_partial",
        mesh: [4],
        axis: 0,
        split: 1,
        reduceScatter: "direct",
        allGather: "swizzle",
        afterCompute: true,
      }),
    );
    const schedule = lowerToTileSchedule(
      plan,
      { tensor: "C_partial", problem: { M, N: 4096, K: 4096 }, tile: { BM: 128, BN: 256, BK: 64 }, persistent: { numSms: 116 } },
      { role: "producer" },
    );
    const pushes = simulate(plan, schedule, { hardware: "H100_SXM", backend: "sm", commSms: 16 });
    const broadcast = simulate(plan, schedule, { hardware: "H100_SXM", backend: "sm", commSms: 16, broadcastAfterCompute: true });
    expect(broadcast.latencyMs).toBeLessThan(pushes.latencyMs);
    // The GEMM is the same; only the transfers after it move faster.
    expect(broadcast.ranks[0]!.computeAloneMs).toBeCloseTo(pushes.ranks[0]!.computeAloneMs, 9);
    // allReduceOptions states the rule: the partitioned form over SM transfers broadcasts after compute.
    const ruled = simulate(plan, schedule, {
      hardware: "H100_SXM",
      backend: "sm",
      commSms: 16,
      ...allReduceOptions("partitioned", "sm", 16),
    });
    expect(ruled.latencyMs).toBe(broadcast.latencyMs);
    expect(allReduceOptions("partitioned", "copy-engine", 16)).toEqual({});
    expect(allReduceOptions("tilewise", "sm", 8)).toEqual({ reduceKernel: { programs: 8, concurrent: true } });
  });

  it("a persistent grid wider than the SMs left to compute pays for its extra programs", () => {
    const wide = gemmRs(2, 1, 132);
    const fit = gemmRs(2, 1, 116);
    const a = simulate(wide.plan, wide.schedule, { hardware: "H200_SXM", backend: "sm", commSms: 16 });
    const b = simulate(fit.plan, fit.schedule, { hardware: "H200_SXM", backend: "sm", commSms: 16 });
    expect(a.latencyMs).toBeGreaterThan(b.latencyMs);
  });

  it("SM backend takes SMs from compute", () => {
    const { plan, schedule } = agGemm(2, 1);
    const ce = simulate(plan, schedule, { hardware: "H200_SXM" });
    const sm = simulate(plan, schedule, { hardware: "H200_SXM", backend: "sm", commSms: 66 });
    expect(sm.latencyMs).toBeGreaterThan(ce.latencyMs);
  });

  it("rejects bad options and mismatched schedules with typed errors", () => {
    const { plan, schedule } = agGemm(2, 1);
    const other = agGemm(4, 1).schedule;
    expect(code(() => simulate(plan, other, { hardware: "H200_SXM" }))).toBe("schedule-mismatch");
    expect(code(() => simulate(plan, schedule, { hardware: "B200" }))).toBe("bad-hardware");
    expect(code(() => simulate(plan, schedule, { hardware: { ...H200_SXM, smCount: -1 } }))).toBe("bad-hardware");
    expect(code(() => simulate(plan, schedule, { hardware: "H200_SXM", backend: "sm", commSms: 0 }))).toBe("bad-option");
    expect(code(() => simulate(plan, schedule, { hardware: "H200_SXM", commSms: 132 }))).toBe("bad-option");
    expect(code(() => simulate(plan, schedule, { hardware: "H200_SXM", computeKernel: { efficiency: 0 } }))).toBe("bad-option");
  });

  it("H100's GEMM throughput reproduces the measured 8192³ GEMM (798 TFLOP/s)", () => {
    const ms = gemmMs(H100_SXM, { M: 8192, N: 8192, K: 8192 });
    expect((2 * 8192 ** 3) / (ms * 1e-3) / 1e12).toBeCloseTo(798, -1);
  });

  it("predictBaselines: GEMM, collective, their sum and the bound; bad input is an error", () => {
    const b = predictBaselines({
      hardware: "H200_SXM",
      problem: { M: 8192, N: 5504, K: 4096 },
      collective: { kind: "all-gather", shape: [8192, 4096], dtype: "bf16" },
      world: 2,
    });
    expect(b.notOverlappedMs).toBeCloseTo(b.gemmMs + b.collectiveMs, 12);
    expect(b.boundMs).toBe(Math.max(b.gemmMs, b.collectiveMs));
    expect(b.collectiveMs).toBeCloseTo(0.054 + (0.5 * 8192 * 4096 * 2) / 268e6, 9);
    expect(() =>
      predictBaselines({
        hardware: "H200_SXM",
        problem: { M: 0, N: 1, K: 1 },
        collective: { kind: "all-gather", shape: [8], dtype: "bf16" },
        world: 2,
      }),
    ).toThrow(SimulateError);
    expect(() =>
      predictBaselines({
        hardware: "H200_SXM",
        problem: { M: 8, N: 1, K: 1 },
        collective: { kind: "all-gather", shape: [8], dtype: "bf16" },
        world: 0,
      }),
    ).toThrow(/positive integer/);
  });

  it("built-in models parse and cite their sources", () => {
    for (const hw of [H100_SXM, H200_SXM]) {
      expect(HardwareModel.parse(hw)).toEqual(hw);
      for (const key of ["gemm", "copyEngine", "collective", "signal"])
        expect(hw.source[key]).toMatch(/measured|derived|assumed|datasheet/);
    }
  });
});

describe("simulate properties", () => {
  const cases = fc.record({
    world: fc.constantFrom(2, 4, 8),
    split: fc.integer({ min: 1, max: 3 }),
    rows: fc.constantFrom(2048, 4096, 8192),
    n: fc.constantFrom(512, 1376, 2752),
    ring: fc.boolean(),
  });
  const opts = { numRuns: 12 };

  it("latency ≥ bound and ≤ non-overlapped + overheads; deterministic", () => {
    fc.assert(
      fc.property(cases, ({ world, split, rows, n, ring }) => {
        const { plan, schedule } = agGemm(world, split, { rows, n, ring });
        const a = simulate(plan, schedule, { hardware: "H200_SXM" });
        const b = simulate(plan, schedule, { hardware: "H200_SXM" });
        expect(b).toEqual(a);
        const under = H200_SXM.contention.copyBandwidthUnderCompute ?? 1;
        for (const r of a.ranks) {
          expect(r.latencyMs).toBeGreaterThanOrEqual(r.boundMs - 1e-9);
          // Overheads: tiles beside copies slow by copySlowdown, copies beside the GEMM move at `under` of their bandwidth.
          expect(r.latencyMs).toBeLessThanOrEqual(r.computeAloneMs * (1 + H200_SXM.contention.copySlowdown) + r.commAloneMs / under + 1e-9);
        }
        // Without the copy-bandwidth loss, overlapping never costs more than running one after the other (+ tile slow-down).
        const lossless = simulate(plan, schedule, { hardware: noCopyLoss });
        for (const r of lossless.ranks) {
          expect(r.latencyMs).toBeLessThanOrEqual(r.nonOverlappedMs * (1 + H200_SXM.contention.copySlowdown) + 1e-9);
        }
      }),
      opts,
    );
  });

  it("GEMM+RS on either backend: bound ≤ latency ≤ non-overlapped + overheads", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4, 8),
        fc.integer({ min: 1, max: 2 }),
        fc.constantFrom("copy-engine", "sm") as fc.Arbitrary<"copy-engine" | "sm">,
        (world, split, backend) => {
          // A persistent kernel beside 16 copy SMs is launched on the 116 SMs left.
          const { plan, schedule } = gemmRs(world, split, backend === "sm" ? 116 : 132);
          const r = simulate(plan, schedule, { hardware: "H200_SXM", backend });
          for (const x of r.ranks) {
            expect(x.latencyMs).toBeGreaterThanOrEqual(x.boundMs - 1e-9);
            // SM copies also take commSms SMs from compute.
            const tiles = schedule.grid.numTiles;
            const fewerSms = backend === "sm" ? Math.ceil(tiles / (132 - 16)) / Math.ceil(tiles / 132) : 1;
            const under = backend === "copy-engine" ? (H200_SXM.contention.copyBandwidthUnderCompute ?? 1) : 1;
            expect(x.latencyMs).toBeLessThanOrEqual(
              x.computeAloneMs * fewerSms * (1 + H200_SXM.contention.copySlowdown) + x.commAloneMs / under + 1e-9,
            );
          }
        },
      ),
      { numRuns: 8 },
    );
  });

  it("is monotone in bandwidth", () => {
    fc.assert(
      fc.property(cases, fc.double({ min: 1, max: 4, noNaN: true }), ({ world, split, rows, n, ring }, scale) => {
        const { plan, schedule } = agGemm(world, split, { rows, n, ring });
        const slow = simulate(plan, schedule, { hardware: withBandwidth(1 / scale) });
        const fast = simulate(plan, schedule, { hardware: withBandwidth(1) });
        expect(fast.latencyMs).toBeLessThanOrEqual(slow.latencyMs + 1e-9);
      }),
      opts,
    );
  });

  it("a plan with no communication predicts the compute time", () => {
    fc.assert(
      fc.property(fc.constantFrom(1024, 4096, 8192), fc.constantFrom(512, 2752, 5504), (rows, n) => {
        const { plan, schedule } = agGemm(1, 1, { rows, n });
        const bare: ChunkPlan = plan;
        expect(bare.ranks.every((r) => r.streams.every((s) => s.length === 0))).toBe(true);
        const r = simulate(bare, schedule, { hardware: "H200_SXM" });
        expect(r.commAloneMs).toBe(0);
        expect(r.latencyMs).toBeCloseTo(gemmMs(H200_SXM, { M: rows, N: n, K: 4096 }), 12);
      }),
      { numRuns: 6 },
    );
  });
});

describe("calibration mechanisms", () => {
  it("pipelines a stream's copy launches: only its first copy pays the full start latency", () => {
    const { plan, schedule } = agGemm(8, 2);
    const piped = simulate(plan, schedule, { hardware: "H200_SXM" });
    const serial = simulate(plan, schedule, { hardware: "H200_SXM", pipelinedLaunch: false });
    expect(piped.commAloneMs).toBeLessThan(serial.commAloneMs);
    const launches = (r: typeof piped) => r.ranks[0]!.events.filter((e) => e.kind === "launch").map((e) => e.endMs - e.startMs);
    const full = (H200_SXM.copyEngine.launchUs + H200_SXM.copyEngine.launchPerRankUs * 8) * 1e-3;
    expect(launches(serial).every((d) => Math.abs(d - full) < 1e-9)).toBe(true);
    const first = launches(piped)[0]!;
    expect(first).toBeCloseTo(full, 9);
    // Later launches only show the part their predecessor's transfer did not hide.
    expect(
      launches(piped)
        .slice(1)
        .every((d) => d < full - 1e-6),
    ).toBe(true);
    expect(piped.latencyMs).toBeGreaterThanOrEqual(piped.boundMs - 1e-9);
  });

  it("prices the emitted Triton GEMM by its own calibration, and refuses a model without one", () => {
    const { plan, schedule } = agGemm(2, 1);
    const cublas = simulate(plan, schedule, { hardware: "H200_SXM" });
    const triton = simulate(plan, schedule, { hardware: "H200_SXM", computeKernel: { kind: "triton" } });
    const t = H200_SXM.tritonGemm!;
    const rounds = Math.ceil(schedule.grid.numTiles / 132);
    const tile = ((2 * 128 * 256 * 4096) / (H200_SXM.gemm.tflopsPerSm * 1e12 * t.efficiency)) * 1e3;
    expect(triton.computeAloneMs).toBeCloseTo(t.launchUs * 1e-3 + rounds * tile, 9);
    expect(triton.computeAloneMs).toBeGreaterThan(cublas.computeAloneMs);
    const bare: HardwareModel = { ...H200_SXM, tritonGemm: undefined };
    expect(code(() => simulate(plan, schedule, { hardware: bare, computeKernel: { kind: "triton" } }))).toBe("bad-option");
    expect(code(() => simulate(plan, schedule, { hardware: "H200_SXM", computeKernel: { kind: "cutlass" as "triton" } }))).toBe(
      "bad-option",
    );
  });

  it("prices a stream-K body's last wave as pieces along K plus their partial sums", () => {
    // 8192×3696 at 128×256: 960 tiles, 7 whole rounds over 132 programs and 36 tiles cut in 3.
    const { plan, schedule } = agGemm(2, 1, { n: 3696 });
    const whole = simulate(plan, schedule, { hardware: "H200_SXM", computeKernel: { kind: "triton" } });
    const sk = simulate(plan, schedule, { hardware: "H200_SXM", computeKernel: { kind: "triton", tail: "stream-k" } });
    const t = H200_SXM.tritonGemm!;
    const tile = ((2 * 128 * 256 * 4096) / (H200_SXM.gemm.tflopsPerSm * 1e12 * t.efficiency)) * 1e3;
    expect(streamKSplit(960, 132, 4096)).toEqual({ tail: 36, split: 3 });
    const partial = (128 * 256 * 4) / SM_STORE_BYTES_PER_US / 1e3;
    expect(whole.computeAloneMs).toBeCloseTo(t.launchUs * 1e-3 + 8 * tile, 9);
    expect(sk.computeAloneMs).toBeCloseTo(t.launchUs * 1e-3 + 7 * tile + (Math.ceil(64 / 3) / 64) * tile + partial + 3 * partial, 9);
    // No tail to cut (8192×4096: 1024 tiles leave 100, one piece each): the same as whole tiles.
    const even = agGemm(2, 1, { n: 4096 });
    expect(
      simulate(even.plan, even.schedule, { hardware: "H200_SXM", computeKernel: { kind: "triton", tail: "stream-k" } }).computeAloneMs,
    ).toBe(simulate(even.plan, even.schedule, { hardware: "H200_SXM", computeKernel: { kind: "triton" } }).computeAloneMs);
    expect(code(() => simulate(plan, schedule, { hardware: "H200_SXM", computeKernel: { tail: "split-k" as "wave" } }))).toBe("bad-option");
  });

  it("runs the reduction kernel at its grid's in-flight bandwidth over (W + 1) slabs", () => {
    const rk = H200_SXM.reduceKernel!;
    // Saturating in the grid: half the peak at halfPrograms, monotone, below the peak.
    expect(reduceKernelGBps(H200_SXM, rk.halfPrograms)).toBeCloseTo(rk.peakGBps / 2, 9);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 1, max: 4096 }), (a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        expect(reduceKernelGBps(H200_SXM, hi)).toBeGreaterThanOrEqual(reduceKernelGBps(H200_SXM, lo));
        expect(reduceKernelGBps(H200_SXM, hi)).toBeLessThan(rk.peakGBps);
      }),
      { numRuns: 20 },
    );
    expect(reduceKernelGBps({ ...H200_SXM, reduceKernel: undefined })).toBe(H200_SXM.hbmGBps);
    // With deliveries that cost nothing the pass is its closed form: it reads every rank's
    // partial of the slab and writes the sum, (W + 1) slabs of bytes.
    const instant: HardwareModel = {
      ...withBandwidth(1e4),
      copyEngine: { ...H200_SXM.copyEngine, bandwidthGBps: 1e7, launchUs: 0, launchPerRankUs: 0 },
      signal: { ...H200_SXM.signal, streamWriteUs: 0, streamWritePerRankUs: 0 },
      hbmGBps: 1e7,
    };
    for (const world of [2, 4]) {
      const { plan, schedule } = gemmRs(world, 1);
      const slab = (8192 / world) * 4096 * 2;
      for (const programs of [64, 132, 264]) {
        const r = simulate(plan, schedule, { hardware: instant, reduceKernel: { programs } });
        const e = r.ranks[0]!.events.find((x) => x.kind === "reduce")!;
        expect(e.endMs - e.startMs).toBeCloseTo(reducePassMs(instant, (world + 1) * slab, programs), 6);
      }
    }
    const { plan, schedule } = gemmRs(2, 1);
    expect(code(() => simulate(plan, schedule, { hardware: "H200_SXM", reduceKernel: { programs: 0 } }))).toBe("bad-option");
  });

  it("slows copies beside the GEMM: latency is monotone in copyBandwidthUnderCompute, comm alone is not affected", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(2, 4, 8),
        fc.integer({ min: 1, max: 2 }),
        fc.double({ min: 0.1, max: 1, noNaN: true }),
        fc.double({ min: 0.1, max: 1, noNaN: true }),
        (world, split, x, y) => {
          const [lo, hi] = x <= y ? [x, y] : [y, x];
          const hw = (f: number): HardwareModel => ({ ...H200_SXM, contention: { ...H200_SXM.contention, copyBandwidthUnderCompute: f } });
          const { plan, schedule } = agGemm(world, split);
          const slow = simulate(plan, schedule, { hardware: hw(lo) });
          const fast = simulate(plan, schedule, { hardware: hw(hi) });
          expect(fast.latencyMs).toBeLessThanOrEqual(slow.latencyMs + 1e-9);
          expect(fast.commAloneMs).toBeCloseTo(slow.commAloneMs, 12);
        },
      ),
      { numRuns: 10 },
    );
  });
});
