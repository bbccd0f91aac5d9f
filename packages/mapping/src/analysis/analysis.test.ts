import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import { add, constant, min, mul, variable } from "../expr/expr.js";
import { allGatherPull, matrixTiles, rowSharding } from "../maps/collectives.js";
import { tileBox, type Box, type ShapeMap } from "../maps/tile-maps.js";
import { staticMap } from "../tables/table.js";
import { coversExactlyOnce, exactCover } from "./cover.js";
import { rankMapConsistent } from "./sharding.js";
import { consumerWaits } from "./waits.js";

const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (e instanceof MappingError) return e.code;
    throw e;
  }
  return undefined;
};

/** A 1-D shape map of `count` tiles of `size` rows with the given end clamp. */
function rows1d(count: number, size: number, clamp: number, step = size): ShapeMap {
  const t = variable("tile", { min: 0, max: count - 1 });
  return {
    tile: "tile",
    tileCount: count,
    ranges: [{ start: staticMap(mul(t, step)), end: staticMap(min(add(mul(t, step), size), clamp)) }],
  };
}

describe("coversExactlyOnce", () => {
  it("accepts an exact tiling and lists empty tiles", () => {
    expect(coversExactlyOnce(rows1d(4, 3, 10), [10])).toEqual({ ok: true, tileCount: 4, emptyTiles: [] });
  });

  it("names the first gap", () => {
    const r = coversExactlyOnce(rows1d(4, 2, 10, 3), [10]);
    expect(r).toMatchObject({ ok: false, issue: { kind: "gap", point: [2] } });
    expect(r.ok ? "" : r.message).toBe("no tile covers element [2]");
    // Too few tiles leave the end uncovered.
    expect(coversExactlyOnce(rows1d(4, 3, 10), [10], 3)).toMatchObject({ ok: false, issue: { kind: "gap", point: [9] } });
  });

  it("names the first overlap and the two tiles", () => {
    const r = coversExactlyOnce(rows1d(4, 4, 12, 3), [12]);
    expect(r).toMatchObject({ ok: false, issue: { kind: "overlap", point: [3], tiles: [0, 1] } });
  });

  it("reports tiles outside the tensor and inverted ranges", () => {
    expect(coversExactlyOnce(rows1d(4, 3, 12), [10])).toMatchObject({ ok: false, issue: { kind: "out-of-bounds", tile: 3, dim: 0 } });
    const inverted = exactCover(
      [
        { start: [0], end: [5] },
        { start: [7], end: [5] },
      ],
      [5],
    );
    expect(inverted).toMatchObject({ ok: false, issue: { kind: "inverted", tile: 1, start: 7, end: 5 } });
  });

  it("finds gaps and overlaps in 2-D tilings", () => {
    const boxes: Box[] = [
      { start: [0, 0], end: [2, 4] },
      { start: [2, 0], end: [4, 2] },
      { start: [2, 3], end: [4, 4] },
    ];
    expect(exactCover(boxes, [4, 4])).toMatchObject({ ok: false, issue: { kind: "gap", point: [2, 2] } });
    boxes.push({ start: [1, 2], end: [4, 3] });
    expect(exactCover(boxes, [4, 4])).toMatchObject({ ok: false, issue: { kind: "overlap", point: [1, 2], tiles: [0, 3] } });
  });

  it("agrees with a per-element count on random box sets", () => {
    const box = fc
      .tuple(fc.nat(6), fc.nat(6), fc.nat(6), fc.nat(6))
      .map(([a, b, c, d]): Box => ({ start: [Math.min(a, b), Math.min(c, d)], end: [Math.max(a, b), Math.max(c, d)] }));
    fc.assert(
      fc.property(fc.array(box, { maxLength: 6 }), (boxes) => {
        const counts = new Map<string, number>();
        for (const b of boxes)
          for (let i = b.start[0]!; i < b.end[0]!; i++)
            for (let j = b.start[1]!; j < b.end[1]!; j++) counts.set(`${i},${j}`, (counts.get(`${i},${j}`) ?? 0) + 1);
        let exact = true;
        for (let i = 0; i < 6; i++) for (let j = 0; j < 6; j++) if (counts.get(`${i},${j}`) !== 1) exact = false;
        expect(exactCover(boxes, [6, 6]).ok).toBe(exact);
      }),
      { numRuns: 200 },
    );
  });

  it("rejects bad tensor shapes and tile counts", () => {
    expect(code(() => coversExactlyOnce(rows1d(4, 3, 10), [0]))).toBe("invalid-size");
    expect(code(() => coversExactlyOnce(rows1d(4, 3, 10), []))).toBe("invalid-size");
    expect(code(() => coversExactlyOnce(rows1d(4, 3, 10), [10, 2]))).toBe("invalid-size");
    expect(code(() => coversExactlyOnce(rows1d(4, 3, 10), [10], 0))).toBe("invalid-size");
    expect(code(() => coversExactlyOnce(rows1d(4, 3, 10), [10], 5))).toBe("out-of-range");
  });
});

describe("rankMapConsistent", () => {
  it("accepts the AllGather rank map and rejects a shifted one", () => {
    const m = allGatherPull({ rows: 30, cols: 4, worldSize: 5, tileRows: 4 });
    const sharding = rowSharding(30, 5);
    expect(rankMapConsistent(m, sharding)).toEqual({ ok: true });
    const t = variable("tile", { min: 0, max: m.shape.tileCount - 1 });
    const shifted = { ...m, rank: { ...m.rank, rank: staticMap(min(add(m.rank.rank.kind === "static" ? m.rank.rank.expr : t, 1), 4)) } };
    const r = rankMapConsistent(shifted, sharding);
    expect(r).toMatchObject({ ok: false, tile: 0, rank: 1, range: [0, 4], owned: [6, 12] });
  });

  it("reports ranks outside the sharding and tiles that straddle shards", () => {
    const m = allGatherPull({ rows: 30, cols: 4, worldSize: 5, tileRows: 4 });
    expect(rankMapConsistent(m, rowSharding(30, 3))).toMatchObject({ ok: false, tile: 2, rank: 1, range: [6, 10], owned: [10, 20] });
    const beyond = rankMapConsistent({ shape: m.shape, rank: { ...m.rank, rank: staticMap(constant(5)) } }, rowSharding(30, 5));
    expect(beyond).toMatchObject({ ok: false, tile: 0, rank: 5, owned: undefined });
    expect(beyond.ok ? "" : beyond.message).toContain("not in the sharding of 5 ranks");
    // 5-row tiles against 4-row shards: tile 0 spans [0, 5) but rank 0 owns [0, 4).
    const straddle = {
      shape: matrixTiles({ rows: 30, cols: 4, tileRows: 5, tileCols: 4 }),
      rank: { tile: "tile", tileCount: 6, rank: staticMap(variable("tile", { min: 0, max: 5 })) },
    };
    expect(rankMapConsistent(straddle, rowSharding(30, 8))).toMatchObject({ ok: false, tile: 0, range: [0, 5], owned: [0, 4] });
  });

  it("rejects an empty sharding, inverted ranges and mismatched maps", () => {
    const m = allGatherPull({ rows: 8, cols: 4, worldSize: 2, tileRows: 4 });
    expect(code(() => rankMapConsistent(m, []))).toBe("invalid-size");
    expect(code(() => rankMapConsistent(m, [{ start: 4, end: 0 }]))).toBe("invalid-size");
    expect(code(() => rankMapConsistent(m, rowSharding(8, 2), { dim: 2 }))).toBe("invalid-size");
    expect(code(() => rankMapConsistent({ shape: m.shape, rank: { ...m.rank, tileCount: 1 } }, rowSharding(8, 2)))).toBe("invalid-size");
  });
});

describe("consumerWaits (decoupled producer/consumer tile sizes)", () => {
  it("computes the exact producer tiles of each consumer tile", () => {
    // Producer: AllGather tiles of 2 rows x 3 cols over [10, 7]; consumer: GEMM tiles of 3 rows x 7 cols.
    const producer = allGatherPull({ rows: 10, cols: 7, worldSize: 3, tileRows: 2, tileCols: 3 }).shape;
    const consumer = matrixTiles({ rows: 10, cols: 7, tileRows: 3, tileCols: 7 });
    const r = consumerWaits(producer, consumer);
    expect(r.ok).toBe(true);
    expect(r.waits).toEqual([
      [0, 1, 2, 3, 4, 5],
      [3, 4, 5, 6, 7, 8],
      [9, 10, 11, 12, 13, 14],
      [12, 13, 14],
    ]);
  });

  it("agrees with a per-element derivation for random decoupled sizes", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom(1, 2, 3, 5, 6, 7),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 11 }),
        fc.integer({ min: 1, max: 7 }),
        (rows, cols, worldSize, tp, tpc, tc, tcc) => {
          const producer = allGatherPull({ rows, cols, worldSize, tileRows: tp, tileCols: tpc }).shape;
          const consumer = matrixTiles({ rows, cols, tileRows: tc, tileCols: tcc });
          const r = consumerWaits(producer, consumer);
          expect(r.ok).toBe(true);
          const owner = new Map<string, number>();
          for (let p = 0; p < producer.tileCount; p++) {
            const b = tileBox(producer, p);
            for (let i = b.start[0]!; i < b.end[0]!; i++) for (let j = b.start[1]!; j < b.end[1]!; j++) owner.set(`${i},${j}`, p);
          }
          for (let c = 0; c < consumer.tileCount; c++) {
            const b = tileBox(consumer, c);
            const need = new Set<number>();
            for (let i = b.start[0]!; i < b.end[0]!; i++) for (let j = b.start[1]!; j < b.end[1]!; j++) need.add(owner.get(`${i},${j}`)!);
            expect(r.waits[c]).toEqual([...need].sort((x, y) => x - y));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("reports consumer data no producer tile writes", () => {
    const producer = rows1d(3, 2, 10, 3); // rows [0,2) [3,5) [6,8): gaps at 2, 5, 8, 9
    const consumer = rows1d(2, 5, 10);
    const r = consumerWaits(producer, consumer);
    expect(r.ok).toBe(false);
    expect(r.waits).toEqual([[0, 1], [2]]);
    expect(r.uncovered).toEqual([
      { consumerTile: 0, point: [2] },
      { consumerTile: 1, point: [5] },
    ]);
  });

  it("rejects maps over tensors of different rank", () => {
    expect(code(() => consumerWaits(rows1d(2, 2, 4), matrixTiles({ rows: 4, cols: 4, tileRows: 2, tileCols: 2 })))).toBe("invalid-size");
  });
});
