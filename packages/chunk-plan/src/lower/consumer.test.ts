import { evaluateMap, type IndexMap } from "@ovl/mapping";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkPlan } from "../model/schema.js";
import { planSignals, slotsOfRank } from "../signals/index.js";
import {
  checkTileSchedule,
  lowerToTileSchedule,
  TileSchedule,
  TileScheduleError,
  tileScheduleJsonSchema,
  type RankTileSchedule,
} from "./index.js";
import { groupedOrder } from "./swizzle.js";
import { allGatherPullSwizzled, part, shardChunks } from "./testing/plans.js";

const consumerArb = fc.record({
  world: fc.integer({ min: 2, max: 7 }),
  split: fc.integer({ min: 1, max: 3 }),
  streams: fc.integer({ min: 1, max: 3 }),
  extra: fc.integer({ min: 0, max: 300 }),
  N: fc.integer({ min: 1, max: 300 }),
  BM: fc.constantFrom(16, 32, 64, 128, 256),
  BN: fc.constantFrom(16, 32, 64, 128),
  groupSizeM: fc.integer({ min: 1, max: 4 }),
  numSms: fc.option(fc.integer({ min: 1, max: 132 }), { nil: undefined }),
});
interface Case {
  world: number;
  split: number;
  streams: number;
  extra: number;
  N: number;
  BM: number;
  BN: number;
  groupSizeM: number;
  numSms: number | undefined;
}

function lowerCase(c: Case): { plan: ChunkPlan; schedule: TileSchedule; M: number } {
  const M = c.world * c.split + c.extra;
  const plan = allGatherPullSwizzled({ world: c.world, M, K: 32, split: c.split, streams: c.streams });
  const schedule = lowerToTileSchedule(plan, {
    tensor: "A",
    problem: { M, N: c.N, K: 32 },
    tile: { BM: c.BM, BN: c.BN, BK: 32 },
    persistent: c.numSms === undefined ? null : { numSms: c.numSms },
    groupSizeM: c.groupSizeM,
  });
  return { plan, schedule, M };
}

/** Waited slots at visit v, from the padded columns. */
function waitsAt(rs: RankTileSchedule, v: number): number[] {
  return rs.tables.waitSlot.map((col) => col[v] ?? -1).filter((s) => s >= 0);
}

function expectMapsReproduceTables(rs: RankTileSchedule): void {
  const pairs: [IndexMap, number[]][] = [
    [rs.maps.tile, rs.tables.tile],
    [rs.maps.pidM, rs.tables.pidM],
    [rs.maps.pidN, rs.tables.pidN],
    [rs.maps.wave, rs.tables.wave],
    ...rs.maps.waitSlot.map((m, j): [IndexMap, number[]] => [m, rs.tables.waitSlot[j] ?? []]),
    ...rs.maps.waitArrivals.map((m, j): [IndexMap, number[]] => [m, rs.tables.waitArrivals[j] ?? []]),
  ];
  for (const [map, table] of pairs) {
    expect(table.map((_x, v) => evaluateMap(map, { v }))).toEqual(table);
  }
}

describe("lowerToTileSchedule, consumer (AllGather + GEMM)", () => {
  it("visits every tile once, waits on exactly the chunks its rows meet, local tiles first, waves in arrival order", () => {
    fc.assert(
      fc.property(consumerArb, (c) => {
        const { plan, schedule, M } = lowerCase(c);
        const signed = planSignals(plan);
        const numPidM = Math.ceil(M / c.BM);
        const numPidN = Math.ceil(c.N / c.BN);
        expect(schedule.role).toBe("consumer");
        expect(schedule.grid).toMatchObject({ numPidM, numPidN, numTiles: numPidM * numPidN });
        expect(schedule.ranks.map((r) => r.rank)).toEqual([...Array(c.world).keys()]);
        for (const rs of schedule.ranks) {
          const r = rs.rank;
          expect([...rs.tables.tile].sort((a, b) => a - b)).toEqual([...Array(numPidM * numPidN).keys()]);
          // Arrival order of the swizzled pull: peers (r + i) % world, their chunks in order.
          const arrivals = Array.from({ length: c.world - 1 }, (_, i) => shardChunks(M, c.world, c.split, (r + i + 1) % c.world)).flat();
          const slotRows = new Map(slotsOfRank(signed, r).map((s) => [s.slot, s.region?.offsets[0] ?? -1]));
          const [localLo, localHi] = part(M, c.world, r);
          let sawWait = false;
          let lastWave = 0;
          rs.tables.tile.forEach((_t, v) => {
            const lo = (rs.tables.pidM[v] ?? 0) * c.BM;
            const hi = Math.min(lo + c.BM, M);
            const meets = arrivals.map((ch, k) => ({ ch, k })).filter(({ ch: [a, b] }) => a < hi && lo < b);
            const got = waitsAt(rs, v).map((s) => slotRows.get(s));
            expect([...got].sort((x, y) => (x ?? 0) - (y ?? 0))).toEqual(meets.map(({ ch }) => ch[0]).sort((x, y) => x - y));
            const isLocal = lo >= localLo && hi <= localHi;
            expect(got.length === 0).toBe(isLocal);
            if (!isLocal) sawWait = true;
            else expect(sawWait).toBe(false);
            const wave = meets.length === 0 ? 0 : 1 + Math.max(...meets.map(({ k }) => k));
            expect(rs.tables.wave[v]).toBe(wave);
            expect(wave).toBeGreaterThanOrEqual(lastWave);
            lastWave = wave;
            rs.tables.waitArrivals.forEach((col, j) => expect(col[v]).toBe((rs.tables.waitSlot[j]?.[v] ?? -1) < 0 ? 0 : 1));
          });
          expectMapsReproduceTables(rs);
        }
        expect(checkTileSchedule(schedule, plan)).toEqual([]);
      }),
      { numRuns: 60 },
    );
  });

  it("round-trips through JSON and the zod schema", () => {
    fc.assert(
      fc.property(consumerArb, (c) => {
        const { schedule } = lowerCase(c);
        expect(TileSchedule.parse(JSON.parse(JSON.stringify(schedule)))).toEqual(schedule);
      }),
      { numRuns: 15 },
    );
  });

  it("publishes the contract as JSON Schema and rejects other versions", () => {
    const json = tileScheduleJsonSchema() as { properties: Record<string, { const?: string }> };
    expect(json.properties.$schema?.const).toBe("ovl.tile-schedule/v1");
    expect(Object.keys(json.properties)).toEqual(["$schema", "plan", "role", "tiling", "grid", "visitVariable", "ranks"]);
    const { schedule } = lowerCase({ world: 2, split: 1, streams: 1, extra: 10, N: 16, BM: 16, BN: 16, groupSizeM: 1, numSms: undefined });
    expect(TileSchedule.safeParse({ ...schedule, $schema: "ovl.tile-schedule/v0" }).success).toBe(false);
  });

  it("sizes the launch grid: numSms persistent programs, or one per tile", () => {
    const base = { world: 3, split: 1, streams: 1, extra: 90, N: 64, BM: 16, BN: 32, groupSizeM: 1 };
    const tiles = Math.ceil(93 / 16) * 2;
    expect(lowerCase({ ...base, numSms: undefined }).schedule.grid).toMatchObject({ programs: tiles, rounds: 1 });
    expect(lowerCase({ ...base, numSms: 5 }).schedule.grid).toMatchObject({ programs: 5, rounds: Math.ceil(tiles / 5) });
    expect(lowerCase({ ...base, numSms: 500 }).schedule.grid).toMatchObject({ programs: tiles, rounds: 1 });
  });

  it("recovers the rank-rotated order as a static modular map when one tile spans the columns", () => {
    // world 4, one chunk per tile row: rank r visits rows (v + r) mod 4.
    const plan = allGatherPullSwizzled({ world: 4, M: 256, K: 16 });
    const schedule = lowerToTileSchedule(plan, { tensor: "A", problem: { M: 256, N: 64, K: 16 }, tile: { BM: 64, BN: 64, BK: 16 } });
    for (const rs of schedule.ranks) {
      expect(rs.maps.pidM.kind).toBe("static");
      expect(rs.tables.pidM).toEqual([0, 1, 2, 3].map((v) => (v + rs.rank) % 4));
    }
  });

  it("rejects tilings and plans it cannot lower correctly, with a typed code", () => {
    const plan = allGatherPullSwizzled({ world: 3, M: 96, K: 8 });
    const tiling = { tensor: "A", problem: { M: 96, N: 32, K: 8 }, tile: { BM: 32, BN: 32, BK: 8 } };
    const code = (p: ChunkPlan, t: typeof tiling) => {
      try {
        lowerToTileSchedule(p, t);
        return "none";
      } catch (e) {
        expect(e).toBeInstanceOf(TileScheduleError);
        return (e as TileScheduleError).code;
      }
    };
    expect(code(plan, tiling)).toBe("none");
    expect(code(plan, { ...tiling, tile: { ...tiling.tile, BM: 0 } })).toBe("bad-tiling");
    expect(code(plan, { ...tiling, tensor: "B" })).toBe("unknown-tensor");
    expect(code(plan, { ...tiling, problem: { ...tiling.problem, M: 95 } })).toBe("shape-mismatch");
    // Rank 0 forgets its last pull: the rows of that chunk never arrive.
    const dropped: ChunkPlan = {
      ...plan,
      ranks: plan.ranks.map((r) => (r.rank === 0 ? { ...r, streams: [r.streams[0]?.slice(0, -1) ?? []] } : r)),
    };
    expect(code(dropped, tiling)).toBe("uncovered-tile");
    // Two ops that wait on each other.
    const cyclic: ChunkPlan = {
      ...plan,
      ranks: plan.ranks.map((r) =>
        r.rank === 0
          ? {
              ...r,
              streams: [
                r.streams[0]?.map((op, i) => ({ ...op, deps: i === 0 ? [{ kind: "op" as const, rank: 0, stream: 0, index: 1 }] : [] })) ??
                  [],
              ],
            }
          : r,
      ),
    };
    expect(code(cyclic, tiling)).toBe("dependency-cycle");
    // A hand-written slot that no op notifies.
    const signed = planSignals(plan);
    const orphan: ChunkPlan = {
      ...signed,
      signals: {
        slots: signed.signals?.slots ?? [],
        notify: (signed.signals?.notify ?? []).map((streams, r) => (r === 1 ? streams.map((ops) => ops.map(() => null)) : streams)),
      },
    };
    expect(code(orphan, tiling)).toBe("unfilled-slot");
  });
});

describe("groupedOrder", () => {
  it("visits a full grid exactly as Triton's grouped pid mapping", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 8 }),
        (numPidM, numPidN, G) => {
          const tiles = Array.from({ length: numPidM * numPidN }, (_, i) => ({ pidM: Math.floor(i / numPidN), pidN: i % numPidN }));
          const triton = Array.from({ length: numPidM * numPidN }, (_, pid) => {
            const inGroup = G * numPidN;
            const first = Math.floor(pid / inGroup) * G;
            const size = Math.min(numPidM - first, G);
            return { pidM: first + ((pid % inGroup) % size), pidN: Math.floor((pid % inGroup) / size) };
          });
          expect(groupedOrder(tiles, G)).toEqual(triton);
        },
      ),
      { numRuns: 60 },
    );
  });
});
