import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { coversExactlyOnce, exactCover } from "../analysis/cover.js";
import { rankMapConsistent } from "../analysis/sharding.js";
import { MappingError } from "../errors.js";
import { mapToPython } from "../tables/table.js";
import {
  allGatherPull,
  allGatherPush,
  allToAll,
  matrixTiles,
  reduceScatterRing,
  rowSharding,
  type CollectiveTiling,
} from "./collectives.js";
import { tileBox, tileChannel, tileRank, type Box, type TileMapping } from "./tile-maps.js";

const tilingArb: fc.Arbitrary<CollectiveTiling> = fc.record({
  rows: fc.integer({ min: 1, max: 60 }),
  cols: fc.integer({ min: 1, max: 20 }),
  worldSize: fc.constantFrom(1, 2, 3, 4, 5, 6, 7, 8),
  tileRows: fc.integer({ min: 1, max: 13 }),
  tileCols: fc.integer({ min: 1, max: 9 }),
  channelsPerRank: fc.integer({ min: 1, max: 4 }),
});

const tiles = (m: TileMapping) => Array.from({ length: m.shape.tileCount }, (_, t) => t);

function channelsInRange(m: TileMapping, rank: number): void {
  for (const t of tiles(m)) {
    const c = tileChannel(m.channel, t, { env: { rank } });
    expect(c).toBeGreaterThanOrEqual(0);
    expect(c).toBeLessThan(m.channel.channelCount);
  }
}

describe("AllGather pull (TileLink §4.1)", () => {
  it("matches the paper's formulas when sizes divide evenly", () => {
    // M = 1024 on R = 4 ranks, Tm_p = 64, C = 2: M_per_rank = 256, src_rank = tile // 4,
    // channel = tile // floor(M_per_channel / Tm_p) = tile // 2.
    const m = allGatherPull({ rows: 1024, cols: 512, worldSize: 4, tileRows: 64, channelsPerRank: 2 });
    expect(mapToPython(m.shape.ranges[0]!.start)).toBe("64 * tile");
    expect(mapToPython(m.shape.ranges[0]!.end)).toBe("64 * tile + 64");
    expect(mapToPython(m.rank.rank)).toBe("tile // 4");
    expect(mapToPython(m.channel.channel)).toBe("tile // 2");
    expect(m.shape.tileCount).toBe(16);
  });

  it("clamps ragged last tiles and shards exactly", () => {
    const m = allGatherPull({ rows: 10, cols: 7, worldSize: 3, tileRows: 3, tileCols: 7 });
    const rows = tiles(m).map((t) => {
      const b = tileBox(m.shape, t);
      return [b.start[0], b.end[0], tileRank(m.rank, t)];
    });
    // Shards of ceil(10 / 3) = 4 rows: [0,4) [4,8) [8,10); tiles of 3 rows cut at the shard end.
    expect(rows).toEqual([
      [0, 3, 0],
      [3, 4, 0],
      [4, 7, 1],
      [7, 8, 1],
      [8, 10, 2],
      [10, 10, 2],
    ]);
  });

  it("covers the gathered tensor exactly once and pulls from the owner, for random shapes", () => {
    fc.assert(
      fc.property(tilingArb, fc.constantFrom("linear" as const, "swizzled" as const), (t, order) => {
        const m = allGatherPull(t, order);
        for (let rank = 0; rank < t.worldSize; rank++) {
          const options = { env: { rank } };
          expect(coversExactlyOnce(m.shape, [t.rows, t.cols], undefined, options)).toMatchObject({ ok: true });
          expect(rankMapConsistent(m, rowSharding(t.rows, t.worldSize), options)).toEqual({ ok: true });
          channelsInRange(m, rank);
          // Swizzled: each rank starts with its own shard.
          if (order === "swizzled") expect(tileRank(m.rank, 0, options)).toBe(rank);
        }
      }),
      { numRuns: 60 },
    );
  });
});

function isEmptyBox(b: Box): boolean {
  return b.start.some((s, d) => s >= b.end[d]!);
}

describe("AllGather push", () => {
  it("delivers every shard to every rank exactly once", () => {
    fc.assert(
      fc.property(tilingArb, (t) => {
        const m = allGatherPush(t);
        const sharding = rowSharding(t.rows, t.worldSize);
        for (let dst = 0; dst < t.worldSize; dst++) {
          const boxes: Box[] = [];
          for (let src = 0; src < t.worldSize; src++) {
            for (const tile of tiles(m)) {
              if (tileRank(m.rank, tile, { env: { rank: src } }) !== dst) continue;
              const b = tileBox(m.shape, tile, { env: { rank: src } });
              boxes.push(b);
              // A rank only ever pushes rows it owns.
              if (!isEmptyBox(b)) expect(b.start[0]! >= sharding[src]!.start && b.end[0]! <= sharding[src]!.end).toBe(true);
            }
          }
          expect(exactCover(boxes, [t.rows, t.cols])).toMatchObject({ ok: true });
        }
        channelsInRange(m, t.worldSize - 1);
      }),
      { numRuns: 40 },
    );
  });
});

describe("ReduceScatter ring (TileLink Figure 4)", () => {
  it("prints the paper's segment order and peer", () => {
    const m = reduceScatterRing({ rows: 512, cols: 256, worldSize: 4, tileRows: 128 });
    // One tile per segment: stage = tile, seg = (rank + stage + 1) % 4, to_rank = rank - 1.
    expect(mapToPython(m.shape.ranges[0]!.start)).toBe("128 * ((rank + tile + 1) % 4)");
    expect(mapToPython(m.rank.rank)).toBe("(rank + tile // 3 + 3) % 4");
  });

  it("visits every segment once, sends to the previous rank, and ends on its own segment", () => {
    fc.assert(
      fc.property(tilingArb, (t) => {
        const m = reduceScatterRing(t);
        const sharding = rowSharding(t.rows, t.worldSize);
        const perStage = m.shape.tileCount / t.worldSize;
        for (let rank = 0; rank < t.worldSize; rank++) {
          const options = { env: { rank } };
          expect(coversExactlyOnce(m.shape, [t.rows, t.cols], undefined, options)).toMatchObject({ ok: true });
          for (const tile of tiles(m)) {
            const last = Math.floor(tile / perStage) === t.worldSize - 1;
            expect(tileRank(m.rank, tile, options)).toBe(last ? rank : (rank + t.worldSize - 1) % t.worldSize);
            const b = tileBox(m.shape, tile, options);
            if (last && !isEmptyBox(b)) expect(b.start[0]! >= sharding[rank]!.start && b.end[0]! <= sharding[rank]!.end).toBe(true);
          }
          channelsInRange(m, rank);
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe("AllToAll", () => {
  it("sends every chunk of the send buffer once, chunk r to rank r", () => {
    fc.assert(
      fc.property(tilingArb, (t) => {
        const m = allToAll(t);
        for (let rank = 0; rank < t.worldSize; rank++) {
          const options = { env: { rank } };
          expect(coversExactlyOnce(m.shape, [t.rows, t.cols], undefined, options)).toMatchObject({ ok: true });
          expect(rankMapConsistent(m, rowSharding(t.rows, t.worldSize), options)).toEqual({ ok: true });
          expect(tileRank(m.rank, 0, options)).toBe(rank);
          channelsInRange(m, rank);
        }
      }),
      { numRuns: 40 },
    );
  });
});

describe("matrixTiles", () => {
  it("tiles any matrix exactly once", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 90 }),
        fc.integer({ min: 1, max: 90 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 40 }),
        (rows, cols, tileRows, tileCols) => {
          const s = matrixTiles({ rows, cols, tileRows, tileCols });
          expect(s.tileCount).toBe(Math.ceil(rows / tileRows) * Math.ceil(cols / tileCols));
          expect(coversExactlyOnce(s, [rows, cols])).toMatchObject({ ok: true, emptyTiles: [] });
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe("builder input errors", () => {
  const code = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      if (e instanceof MappingError) return e.code;
      throw e;
    }
    return undefined;
  };
  it("rejects zero or negative sizes and world sizes below 1", () => {
    const ok = { rows: 8, cols: 8, worldSize: 2, tileRows: 2 };
    expect(code(() => allGatherPull({ ...ok, worldSize: 0 }))).toBe("invalid-size");
    expect(code(() => allGatherPush({ ...ok, tileRows: 0 }))).toBe("invalid-size");
    expect(code(() => reduceScatterRing({ ...ok, rows: -4 }))).toBe("invalid-size");
    expect(code(() => allToAll({ ...ok, channelsPerRank: 0 }))).toBe("invalid-size");
    expect(code(() => allGatherPull({ ...ok, tileCols: 1.5 }))).toBe("invalid-size");
    expect(code(() => matrixTiles({ rows: 4, cols: 0, tileRows: 1, tileCols: 1 }))).toBe("invalid-size");
    expect(code(() => rowSharding(4, 0))).toBe("invalid-size");
  });
  it("rejects evaluating a tile outside the map", () => {
    const m = allGatherPull({ rows: 8, cols: 8, worldSize: 2, tileRows: 2 });
    expect(code(() => tileBox(m.shape, m.shape.tileCount))).toBe("out-of-range");
    expect(code(() => tileRank(m.rank, -1))).toBe("out-of-range");
  });
});
