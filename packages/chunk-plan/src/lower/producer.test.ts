import { evaluateMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planSignals, slotsOfRank } from "../signals/index.js";
import { applyTileArrivals, checkTileSchedule, lowerToTileSchedule, TileSchedule, TileScheduleError } from "./index.js";
import { allGatherPullSwizzled, gemmReduceScatterDirect, part } from "./testing/plans.js";

const producerArb = fc.record({
  world: fc.integer({ min: 2, max: 7 }),
  splitN: fc.integer({ min: 1, max: 3 }),
  extraM: fc.integer({ min: 0, max: 300 }),
  extraN: fc.integer({ min: 0, max: 200 }),
  BM: fc.constantFrom(16, 32, 64, 128),
  BN: fc.constantFrom(16, 32, 64, 128),
  groupSizeM: fc.integer({ min: 1, max: 4 }),
});

describe("lowerToTileSchedule, producer (GEMM + ReduceScatter)", () => {
  it("notifies exactly the tile-done slots each tile meets, counts them as arrivals, computes first-sent chunks first", () => {
    fc.assert(
      fc.property(producerArb, (c) => {
        const M = c.world + c.extraM;
        const N = c.splitN + c.extraN;
        const plan = gemmReduceScatterDirect({ world: c.world, M, N, splitN: c.splitN });
        const tiling = { tensor: "C", problem: { M, N, K: 64 }, tile: { BM: c.BM, BN: c.BN, BK: 64 }, groupSizeM: c.groupSizeM };
        const schedule = lowerToTileSchedule(plan, tiling);
        expect(schedule.role).toBe("producer");
        const signed = planSignals(plan);
        const numTiles = Math.ceil(M / c.BM) * Math.ceil(N / c.BN);
        for (const rs of schedule.ranks) {
          const r = rs.rank;
          expect([...rs.tables.tile].sort((a, b) => a - b)).toEqual([...Array(numTiles).keys()]);
          const done = slotsOfRank(signed, r).filter((s) => s.purpose === "tile-done");
          // Send order: blocks of shard r+1, r+2, ..., and r's own shard last.
          const sent = Array.from({ length: c.world }, (_, i) => (r + i + 1) % c.world).flatMap((p) =>
            Array.from({ length: c.splitN }, (_, q) => {
              const rows = part(M, c.world, p);
              const cols = part(N, c.splitN, q);
              return done.find((s) => s.region?.offsets[0] === rows[0] && s.region.offsets[1] === cols[0])?.slot;
            }),
          );
          expect(rs.slotOrder).toEqual(sent);
          const counts = new Map<number, number>();
          let lastWave = 0;
          rs.tables.tile.forEach((_t, v) => {
            const [m0, n0] = [(rs.tables.pidM[v] ?? 0) * c.BM, (rs.tables.pidN[v] ?? 0) * c.BN];
            const [m1, n1] = [Math.min(m0 + c.BM, M), Math.min(n0 + c.BN, N)];
            const meets = done
              .filter((s) => {
                const [a, b] = [s.region?.offsets[0] ?? 0, s.region?.offsets[1] ?? 0];
                const [sa, sb] = [s.region?.sizes[0] ?? 0, s.region?.sizes[1] ?? 0];
                return a < m1 && m0 < a + sa && b < n1 && n0 < b + sb;
              })
              .map((s) => s.slot);
            const got = rs.tables.notifySlot.map((col) => col[v] ?? -1).filter((s) => s >= 0);
            expect([...got].sort((x, y) => x - y)).toEqual([...meets].sort((x, y) => x - y));
            for (const s of got) counts.set(s, (counts.get(s) ?? 0) + 1);
            const wave = Math.min(...got.map((s) => sent.indexOf(s)));
            expect(rs.tables.wave[v]).toBe(wave);
            expect(wave).toBeGreaterThanOrEqual(lastWave);
            lastWave = wave;
          });
          expect(new Map(rs.slots.map((s) => [s.slot, s.arrivals]))).toEqual(counts);
          for (const [map, table] of [
            [rs.maps.tile, rs.tables.tile],
            ...rs.maps.notifySlot.map((m, j) => [m, rs.tables.notifySlot[j] ?? []] as const),
          ] as const) {
            expect(table.map((_x, v) => evaluateMap(map, { v }))).toEqual(table);
          }
        }
        expect(checkTileSchedule(schedule, plan)).toEqual([]);
        expect(TileSchedule.parse(JSON.parse(JSON.stringify(schedule)))).toEqual(schedule);

        // The plan's tile-done arrivals become the tile counts.
        const fixed = applyTileArrivals(plan, schedule);
        for (const rs of schedule.ranks) {
          const byslot = new Map(rs.slots.map((s) => [s.slot, s.arrivals]));
          for (const s of slotsOfRank(fixed, rs.rank)) {
            if (s.purpose === "tile-done") expect(s.arrivals).toBe(byslot.get(s.slot));
            else expect(s.arrivals).toBe(c.world);
          }
        }
      }),
      { numRuns: 50 },
    );
  });

  it("honours an explicit role and refuses applyTileArrivals for a consumer schedule", () => {
    const plan = gemmReduceScatterDirect({ world: 2, M: 64, N: 64 });
    const tiling = { tensor: "C", problem: { M: 64, N: 64, K: 64 }, tile: { BM: 32, BN: 32, BK: 32 } };
    // Read as a consumer, C is neither held nor received: no schedule can be correct.
    expect(() => lowerToTileSchedule(plan, tiling, { role: "consumer" })).toThrow(expect.objectContaining({ code: "uncovered-tile" }));
    const gather = allGatherPullSwizzled({ world: 2, M: 64, K: 64 });
    const gatherTiling = { tensor: "A", problem: { M: 64, N: 64, K: 64 }, tile: { BM: 32, BN: 32, BK: 32 } };
    // Written as a producer, A has no compute dependency: nothing to notify.
    const producer = lowerToTileSchedule(gather, gatherTiling, { role: "producer" });
    expect(producer.ranks.every((r) => r.tables.notifySlot.length === 0 && r.slots.length === 0)).toBe(true);
    expect(checkTileSchedule(producer, gather)).toEqual([]);
    const consumer = lowerToTileSchedule(gather, gatherTiling);
    expect(() => applyTileArrivals(gather, consumer)).toThrow(TileScheduleError);
    expect(applyTileArrivals(gather, producer).signals).toEqual(planSignals(gather).signals);
  });
});
