// Lowering the package's own plan templates: every schedule passes checkTileSchedule, and
// the wave order is the order in which each template delivers (or needs) chunks.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkPlan, Region } from "../model/schema.js";
import { planSignals, slotsOfRank } from "../signals/index.js";
import { allGatherRing, allGatherSwizzle, allReduceTilewise, reduceScatterDirect, reduceScatterRing } from "../templates/index.js";
import { checkTileSchedule, lowerToTileSchedule } from "./index.js";

const within = (inner: Region, outer: Region) =>
  (inner.offsets[0] ?? 0) >= (outer.offsets[0] ?? 0) &&
  (inner.offsets[0] ?? 0) + (inner.sizes[0] ?? 0) <= (outer.offsets[0] ?? 0) + (outer.sizes[0] ?? 0);

/** Chunk slots of rank r, shard by shard in the given order, each shard's chunks by offset. */
function expectedArrivals(plan: ChunkPlan, r: number, shards: number[]): number[] {
  const slots = slotsOfRank(planSignals(plan), r).filter((s) => s.purpose !== "tile-done");
  return shards.flatMap((q) => {
    const shard = plan.ranks[q]?.local[0] as Region;
    return slots
      .filter((s) => within(s.region as Region, shard))
      .sort((a, b) => (a.region?.offsets[0] ?? 0) - (b.region?.offsets[0] ?? 0))
      .map((s) => s.slot);
  });
}

const gatherArb = fc.record({
  world: fc.integer({ min: 2, max: 7 }),
  split: fc.integer({ min: 1, max: 3 }),
  extra: fc.integer({ min: 0, max: 200 }),
  N: fc.integer({ min: 1, max: 200 }),
  BM: fc.constantFrom(16, 32, 64, 128),
  BN: fc.constantFrom(32, 64, 128),
  groupSizeM: fc.integer({ min: 1, max: 3 }),
  template: fc.constantFrom("swizzle-pull", "swizzle-push", "ring-push", "ring-pull"),
});

describe("lowering the AllGather templates (consumer)", () => {
  it("checks clean, and waves follow the template's delivery order", () => {
    fc.assert(
      fc.property(gatherArb, (c) => {
        const M = c.world * c.split + c.extra;
        const [kind, side] = c.template.split("-") as ["swizzle" | "ring", "push" | "pull"];
        const options = { tensor: { name: "A", shape: [M, 24], dtype: "bf16" as const }, axis: 0, mesh: [c.world], split: c.split, side };
        const plan = kind === "swizzle" ? allGatherSwizzle(options) : allGatherRing(options);
        const tiling = { tensor: "A", problem: { M, N: c.N, K: 24 }, tile: { BM: c.BM, BN: c.BN, BK: 32 }, groupSizeM: c.groupSizeM };
        const schedule = lowerToTileSchedule(plan, tiling);
        expect(checkTileSchedule(schedule, plan)).toEqual([]);
        for (const rs of schedule.ranks) {
          const r = rs.rank;
          const shards = Array.from({ length: c.world - 1 }, (_, i) => (kind === "swizzle" ? r + i + 1 : r - i - 1 + c.world) % c.world);
          expect(rs.slotOrder).toEqual(expectedArrivals(plan, r, shards));
          // Tiles that wait on nothing (the local shard's) form a prefix.
          const noWait = rs.tables.wave.map((w) => w === 0);
          expect(noWait.indexOf(false) === -1 || noWait.slice(noWait.indexOf(false)).every((x) => !x)).toBe(true);
        }
      }),
      { numRuns: 40 },
    );
  });
});

const reduceArb = fc.record({
  world: fc.integer({ min: 2, max: 6 }),
  split: fc.integer({ min: 1, max: 2 }),
  extra: fc.integer({ min: 0, max: 150 }),
  N: fc.integer({ min: 8, max: 150 }),
  BM: fc.constantFrom(16, 32, 64),
  BN: fc.constantFrom(16, 32, 64),
  template: fc.constantFrom("rs-ring", "rs-direct", "ar-tilewise-p2p", "ar-tilewise-collective"),
});

describe("lowering the ReduceScatter and AllReduce templates (producer)", () => {
  it("checks clean: every tile notifies the tile-done slots it meets, counted as arrivals", () => {
    fc.assert(
      fc.property(reduceArb, (c) => {
        const M = c.world * c.split + c.extra;
        const tensor = { name: "out", shape: [M, c.N], dtype: "fp32" as const };
        const base = { tensor, src: "C", axis: 0, mesh: [c.world], split: c.split };
        if (c.template.startsWith("ar-tilewise") && M % 48 !== 0 && M % 48 < c.split) {
          // The ragged last 48-row tile is thinner than the split: the template refuses it.
          const path = c.template === "ar-tilewise-p2p" ? "p2p" : "collective";
          expect(() => allReduceTilewise({ ...base, tile: [48, 40], path })).toThrow(expect.objectContaining({ code: "region-too-small" }));
          return;
        }
        const plan =
          c.template === "rs-ring"
            ? reduceScatterRing({ ...base, afterCompute: true })
            : c.template === "rs-direct"
              ? reduceScatterDirect({ ...base, afterCompute: true })
              : allReduceTilewise({ ...base, tile: [48, 40], path: c.template === "ar-tilewise-p2p" ? "p2p" : "collective" });
        const tiling = { tensor: "C", problem: { M, N: c.N, K: 64 }, tile: { BM: c.BM, BN: c.BN, BK: 64 } };
        const schedule = lowerToTileSchedule(plan, tiling);
        expect(schedule.role).toBe("producer");
        expect(checkTileSchedule(schedule, plan)).toEqual([]);
        const signed = planSignals(plan);
        for (const rs of schedule.ranks) {
          const done = slotsOfRank(signed, rs.rank).filter((s) => s.purpose === "tile-done" && s.region?.tensor === "C");
          expect(rs.slotOrder).toHaveLength(done.length);
          const total = rs.tables.notifySlot.reduce((acc, col) => acc + col.filter((s) => s >= 0).length, 0);
          expect(rs.slots.reduce((acc, s) => acc + s.arrivals, 0)).toBe(total);
          if (c.template === "rs-direct") {
            // Rank p's shard q is pulled at step (p - q) mod world: own shard first, then p-1, p-2, ...
            const shards = Array.from({ length: c.world }, (_, i) => (rs.rank - i + c.world) % c.world);
            const want = shards.flatMap((q) => {
              // Rank q's ops all write into its shard q of `out`: their row span is that shard.
              const dsts = plan.ranks[q]?.streams[0]?.map((op) => op.dst) ?? [];
              const lo = Math.min(...dsts.map((d) => d.offsets[0] ?? 0));
              const hi = Math.max(...dsts.map((d) => (d.offsets[0] ?? 0) + (d.sizes[0] ?? 0)));
              const shard: Region = { tensor: "C", offsets: [lo, 0], sizes: [hi - lo, c.N] };
              return done
                .filter((s) => within(s.region as Region, shard))
                .sort((a, b) => (a.region?.offsets[0] ?? 0) - (b.region?.offsets[0] ?? 0))
                .map((s) => s.slot);
            });
            expect(rs.slotOrder).toEqual(want);
          }
        }
      }),
      { numRuns: 30 },
    );
  });
});
