import { describe, expect, it } from "vitest";
import { checkTileSchedule, lowerToTileSchedule, type TileSchedule, type TileScheduleIssueCode } from "./index.js";
import { tableToIndexMap } from "./index-maps.js";
import { allGatherPullSwizzled, gemmReduceScatterDirect } from "./testing/plans.js";

const gather = allGatherPullSwizzled({ world: 3, M: 200, K: 16, split: 2 });
const gatherTiling = { tensor: "A", problem: { M: 200, N: 96, K: 16 }, tile: { BM: 32, BN: 32, BK: 16 }, groupSizeM: 2 };
const reduce = gemmReduceScatterDirect({ world: 3, M: 90, N: 64, splitN: 2 });
const reduceTiling = { tensor: "C", problem: { M: 90, N: 64, K: 16 }, tile: { BM: 32, BN: 16, BK: 16 } };

/** Apply `edit` to rank 1's tables and rebuild its maps from them, so only the edit is wrong. */
function mutate(schedule: TileSchedule, edit: (t: TileSchedule["ranks"][number]["tables"]) => void): TileSchedule {
  const copy = structuredClone(schedule);
  const rs = copy.ranks[1];
  if (rs === undefined) throw new Error("rank 1 missing");
  edit(rs.tables);
  const t = rs.tables;
  rs.maps = {
    tile: tableToIndexMap("t", t.tile),
    pidM: tableToIndexMap("m", t.pidM),
    pidN: tableToIndexMap("n", t.pidN),
    wave: tableToIndexMap("w", t.wave),
    waitSlot: t.waitSlot.map((c, j) => tableToIndexMap(`ws${j}`, c)),
    waitArrivals: t.waitArrivals.map((c, j) => tableToIndexMap(`wa${j}`, c)),
    notifySlot: t.notifySlot.map((c, j) => tableToIndexMap(`ns${j}`, c)),
  };
  return copy;
}

const codes = (s: TileSchedule, plan = gather): TileScheduleIssueCode[] => [...new Set(checkTileSchedule(s, plan).map((i) => i.code))];

describe("checkTileSchedule", () => {
  const consumer = lowerToTileSchedule(gather, gatherTiling);
  const producer = lowerToTileSchedule(reduce, reduceTiling);

  it("accepts what the lowering produces", () => {
    expect(checkTileSchedule(consumer, gather)).toEqual([]);
    expect(checkTileSchedule(producer, reduce)).toEqual([]);
  });

  it("finds a tile visited twice and one never visited", () => {
    const s = mutate(consumer, (t) => {
      t.tile[1] = t.tile[0] ?? 0;
      t.pidM[1] = t.pidM[0] ?? 0;
      t.pidN[1] = t.pidN[0] ?? 0;
    });
    expect(codes(s)).toContain("not-a-permutation");
  });

  it("finds a tile id that disagrees with its coordinates", () => {
    expect(codes(mutate(consumer, (t) => void (t.pidN[0] = ((t.pidN[0] ?? 0) + 1) % 3)))).toContain("coords");
  });

  it("finds a dropped wait, an extra wait and a wrong target", () => {
    const v = consumer.ranks[1]?.tables.waitSlot[0]?.findIndex((s) => s >= 0) ?? -1;
    expect(v).toBeGreaterThanOrEqual(0);
    const dropped = mutate(consumer, (t) => {
      for (const col of t.waitSlot) col[v] = -1;
      for (const col of t.waitArrivals) col[v] = 0;
    });
    expect(codes(dropped)).toEqual(expect.arrayContaining(["wait-set", "uncovered"]));
    const extra = mutate(consumer, (t) => {
      const first = t.waitSlot[0]?.findIndex((s) => s < 0) ?? -1;
      if (t.waitSlot[0]) t.waitSlot[0][first] = 0;
      if (t.waitArrivals[0]) t.waitArrivals[0][first] = 1;
    });
    expect(codes(extra)).toContain("wait-set");
    const target = mutate(consumer, (t) => {
      if (t.waitArrivals[0]) t.waitArrivals[0][v] = 2;
    });
    expect(codes(target)).toEqual(["wait-arrivals"]);
  });

  it("finds waves out of arrival order", () => {
    const reversed = mutate(consumer, (t) => {
      for (const key of ["tile", "pidM", "pidN", "wave"] as const) t[key].reverse();
      for (const col of [...t.waitSlot, ...t.waitArrivals]) col.reverse();
    });
    expect(codes(reversed)).toEqual(["wave-order"]);
  });

  it("finds a map that does not reproduce its table", () => {
    const s = structuredClone(consumer);
    const rs = s.ranks[0];
    if (rs === undefined) throw new Error("rank 0 missing");
    rs.maps.pidM = tableToIndexMap(
      "m",
      rs.tables.pidM.map((x) => x + 1),
    );
    expect(codes(s)).toEqual(["map-mismatch"]);
  });

  it("finds a missing rank and a schedule lowered for another shape", () => {
    expect(codes({ ...consumer, ranks: consumer.ranks.slice(1) })).toEqual(["rank-set"]);
    expect(codes({ ...consumer, tiling: { ...consumer.tiling, tile: { ...consumer.tiling.tile, BM: 64 } } })).toEqual(["grid"]);
  });

  it("finds producer notify sets and arrival counts that do not match", () => {
    const v = producer.ranks[1]?.tables.notifySlot[0]?.findIndex((s) => s >= 0) ?? -1;
    const s = mutate(producer, (t) => {
      for (const col of t.notifySlot) col[v] = -1;
    });
    expect(codes(s, reduce)).toEqual(expect.arrayContaining(["notify-set", "notify-count"]));
    const wrongCount = structuredClone(producer);
    const slot = wrongCount.ranks[2]?.slots[0];
    if (slot) slot.arrivals += 1;
    expect(codes(wrongCount, reduce)).toEqual(["notify-count"]);
  });
});
