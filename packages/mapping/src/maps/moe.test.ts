import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import { evaluateMap, mapToPython } from "../tables/table.js";
import { moeRoutingTables } from "./moe.js";

const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    if (e instanceof MappingError) return e.code;
    throw e;
  }
  return undefined;
};

describe("moeRoutingTables", () => {
  it("gathers token rows expert by expert, in token order", () => {
    const r = moeRoutingTables(
      [
        [0, 2],
        [1, 2],
        [0, 1],
        [2, 3],
      ],
      4,
      { worldSize: 2 },
    );
    expect(r.tables.gatherRows.values).toEqual([0, 2, 1, 2, 0, 1, 3, 3]);
    expect(r.tables.expertOfRow.values).toEqual([0, 0, 1, 1, 2, 2, 2, 3]);
    expect(r.tables.expertOffsets.values).toEqual([0, 2, 4, 7, 8]);
    expect(r.tables.sourceRank?.values).toEqual([0, 1, 0, 1, 0, 0, 1, 1]);
    expect(r.tables.gatherRows).toMatchObject({ name: "gather_rows", length: 8, dtype: "int32" });
    expect(mapToPython(r.maps.tokenRow)).toBe("gather_rows[row]");
    expect(mapToPython(r.maps.expertEnd)).toBe("expert_offsets[expert + 1]");
    expect(mapToPython(r.maps.expertStart, { dialect: "triton" })).toBe("tl.load(expert_offsets + (expert))");
    expect(evaluateMap(r.maps.expertEnd, { expert: 2 })).toBe(7);
    expect(evaluateMap(r.maps.tokenRow, { row: 6 })).toBe(3);
  });

  it("routes every (token, expert) pair exactly once, for random routings", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 30 }),
        fc.nat(),
        (experts, k0, tokens, seed) => {
          const k = Math.min(k0, experts);
          const topk = Array.from({ length: tokens }, (_, t) => Array.from({ length: k }, (_, j) => (seed + t * 7 + j) % experts));
          const r = moeRoutingTables(topk, experts);
          const pairs: string[] = [];
          for (let e = 0; e < experts; e++) {
            const lo = evaluateMap(r.maps.expertStart, { expert: e });
            const hi = evaluateMap(r.maps.expertEnd, { expert: e });
            let prev = -1;
            for (let row = lo; row < hi; row++) {
              const token = evaluateMap(r.maps.tokenRow, { row });
              expect(evaluateMap(r.maps.expert, { row })).toBe(e);
              expect(token).toBeGreaterThan(prev); // in token order
              prev = token;
              pairs.push(`${token}:${e}`);
            }
          }
          const expected = topk.flatMap((ids, t) => ids.map((e) => `${t}:${e}`));
          expect(pairs.sort()).toEqual(expected.sort());
        },
      ),
      { numRuns: 60 },
    );
  });

  it("rejects bad routings and sizes", () => {
    expect(code(() => moeRoutingTables([], 4))).toBe("invalid-size");
    expect(code(() => moeRoutingTables([[0]], 0))).toBe("invalid-size");
    expect(code(() => moeRoutingTables([[]], 2))).toBe("invalid-size");
    expect(code(() => moeRoutingTables([[0, 4]], 4))).toBe("invalid-routing");
    expect(code(() => moeRoutingTables([[0, 1], [1]], 4))).toBe("invalid-routing");
    expect(code(() => moeRoutingTables([[1, 1]], 4))).toBe("invalid-routing");
    expect(code(() => moeRoutingTables([[0.5]], 4))).toBe("invalid-routing");
    expect(code(() => moeRoutingTables([[0]], 4, { worldSize: 0 }))).toBe("invalid-size");
  });
});
