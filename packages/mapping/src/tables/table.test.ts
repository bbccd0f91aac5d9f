import { describe, expect, it } from "vitest";
import { MappingError } from "../errors.js";
import { add, mul, variable } from "../expr/expr.js";
import { evalPython } from "../testing/expr-arbitraries.js";
import { IndexMapSchema, dynamicMap, evaluateMap, fillTable, lookupTable, mapToPython, staticMap } from "./table.js";

const code = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    if (e instanceof MappingError) return e.code;
    throw e;
  }
  return undefined;
};

const tile = variable("tile", { min: 0, max: 3 });

describe("lookup tables", () => {
  it("fills a declared table after checking length and dtype", () => {
    const t = lookupTable("src_rank", 4);
    const filled = fillTable(t, [3, 1, 0, 2]);
    expect(filled).toEqual({ name: "src_rank", length: 4, dtype: "int32", values: [3, 1, 0, 2] });
    expect(t.values).toBeUndefined();
    expect(fillTable(lookupTable("big", 1, "int64"), [2 ** 40]).values).toEqual([2 ** 40]);
  });

  it("reports wrong lengths, values that do not fit the dtype, bad names and sizes", () => {
    const t = lookupTable("src_rank", 4);
    expect(code(() => fillTable(t, [1, 2, 3]))).toBe("table-length");
    expect(code(() => fillTable(t, [1, 2, 3, 2 ** 31]))).toBe("table-dtype");
    expect(code(() => fillTable(t, [1, 2, 3, 0.5]))).toBe("table-dtype");
    expect(code(() => fillTable(lookupTable("x", 1, "int64"), [2 ** 60]))).toBe("table-dtype");
    expect(code(() => lookupTable("1table", 4))).toBe("invalid-identifier");
    expect(code(() => lookupTable("t", 0))).toBe("invalid-size");
    expect(code(() => lookupTable("t", -3))).toBe("invalid-size");
  });
});

describe("index maps", () => {
  const table = fillTable(lookupTable("src_rank", 8), [5, 4, 7, 6, 1, 0, 3, 2]);
  const map = dynamicMap(table, add(mul(tile, 2), 1));

  it("evaluates static and dynamic maps", () => {
    expect(evaluateMap(staticMap(mul(tile, 3)), { tile: 2 })).toBe(6);
    expect([0, 1, 2, 3].map((t) => evaluateMap(map, { tile: t }))).toEqual([4, 6, 0, 2]);
    // Values passed at run time override those stored in the table.
    expect(evaluateMap(map, { tile: 0 }, { src_rank: [0, 9, 0, 0, 0, 0, 0, 0] })).toBe(9);
  });

  it("reports unfilled tables, wrong run-time lengths and indices out of bounds", () => {
    const empty = dynamicMap(lookupTable("slots", 4), tile);
    expect(code(() => evaluateMap(empty, { tile: 0 }))).toBe("table-not-filled");
    expect(code(() => evaluateMap(empty, { tile: 0 }, { slots: [1, 2] }))).toBe("table-length");
    expect(code(() => dynamicMap(lookupTable("slots", 3), tile))).toBe("index-out-of-bounds");
    expect(code(() => evaluateMap(map, {}))).toBe("unknown-variable");
    const forged = { kind: "dynamic" as const, table: fillTable(lookupTable("t", 2), [1, 2]), index: tile };
    expect(code(() => evaluateMap(forged, { tile: 3 }))).toBe("index-out-of-bounds");
  });

  it("prints table reads for Python and Triton, and they evaluate in Python", () => {
    expect(mapToPython(map)).toBe("src_rank[2 * tile + 1]");
    expect(mapToPython(map, { dialect: "triton" })).toBe("tl.load(src_rank + (2 * tile + 1))");
    const got = evalPython([0, 1, 2, 3].map((t) => ({ src: mapToPython(map), env: { tile: t, src_rank: table.values } as never })));
    expect(got).toEqual([4, 6, 0, 2]);
  });

  it("round-trips through its schema", () => {
    expect(IndexMapSchema.parse(JSON.parse(JSON.stringify(map)))).toEqual(map);
    expect(IndexMapSchema.safeParse({ kind: "dynamic", table: { name: "t", length: 0, dtype: "int32" }, index: tile }).success).toBe(false);
  });
});
