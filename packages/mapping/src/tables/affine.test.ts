import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { MappingError } from "../errors.js";
import { evaluate } from "../expr/evaluate.js";
import { floorDiv, variable } from "../expr/expr.js";
import { toPython } from "../expr/print.js";
import { recoverAffine, staticIfAffine } from "./affine.js";
import { dynamicMap, fillTable, lookupTable } from "./table.js";

const indexOver = (n: number) => variable("i", { min: 0, max: n - 1 });
const valuesOf = (e: ReturnType<typeof recoverAffine>, n: number) =>
  e === undefined ? undefined : Array.from({ length: n }, (_, i) => evaluate(e, { i }));

describe("recoverAffine", () => {
  it("recovers affine and rank-rotated tables", () => {
    expect(toPython(recoverAffine([3, 5, 7, 9], indexOver(4)) as never)).toBe("2 * i + 3");
    expect(toPython(recoverAffine([4, 4, 4], indexOver(3)) as never)).toBe("4");
    expect(toPython(recoverAffine([9], indexOver(1)) as never)).toBe("9");
    // (i + rank) % world with rank = 2, world = 5: a swizzled peer order.
    expect(toPython(recoverAffine([2, 3, 4, 0, 1], indexOver(5)) as never)).toBe("(i + 2) % 5");
    expect(toPython(recoverAffine([0, 3, 1, 4, 2], indexOver(5)) as never)).toBe("3 * i % 5");
  });

  it("rejects tables that are neither", () => {
    expect(recoverAffine([0, 1, 2, 4], indexOver(4))).toBeUndefined();
    expect(recoverAffine([0, 2, 1, 3], indexOver(4))).toBeUndefined();
    expect(recoverAffine([5, 0, 5, 1], indexOver(4))).toBeUndefined();
  });

  it("composes with a non-trivial index expression", () => {
    const tile = variable("tile", { min: 0, max: 11 });
    const e = recoverAffine([7, 8, 9, 10], floorDiv(tile, 3));
    expect(toPython(e as never)).toBe("tile // 3 + 7");
  });

  it("reports empty tables, non-integers and index ranges past the table", () => {
    const err = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return (e as MappingError).code;
      }
      return undefined;
    };
    expect(err(() => recoverAffine([], indexOver(1)))).toBe("invalid-size");
    expect(err(() => recoverAffine([1, 2.5], indexOver(2)))).toBe("non-integer");
    expect(err(() => recoverAffine([1, 2], indexOver(3)))).toBe("index-out-of-bounds");
  });

  it("recovers random affine tables exactly", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1000, max: 1000 }),
        fc.integer({ min: -1_000_000, max: 1_000_000 }),
        fc.integer({ min: 1, max: 40 }),
        (a, b, n) => {
          const values = Array.from({ length: n }, (_, i) => a * i + b);
          expect(valuesOf(recoverAffine(values, indexOver(n)), n)).toEqual(values);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("recovers random modular tables (a*i + b) mod m exactly", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 64 }), fc.nat(), fc.nat(), fc.integer({ min: 2, max: 80 }), (m, a0, b0, n) => {
        const [a, b] = [a0 % m, b0 % m];
        const values = Array.from({ length: n }, (_, i) => (a * i + b) % m);
        const e = recoverAffine(values, indexOver(n));
        expect(e).toBeDefined();
        expect(valuesOf(e, n)).toEqual(values);
      }),
      { numRuns: 200 },
    );
  });

  it("never returns a wrong expression for perturbed tables, and rejects breaks of the pattern", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -50, max: 50 }),
        fc.integer({ min: -50, max: 50 }),
        fc.integer({ min: 4, max: 40 }),
        fc.nat(),
        fc.integer({ min: 1, max: 1000 }),
        (a, b, n, at, delta) => {
          const values = Array.from({ length: n }, (_, i) => a * i + b);
          const k = at % n;
          values[k] = (values[k] as number) + delta;
          const e = recoverAffine(values, indexOver(n));
          // Whatever is returned must reproduce the table; a perturbed interior entry of an
          // affine table leaves three or more distinct steps, so nothing may be returned.
          if (e !== undefined) expect(valuesOf(e, n)).toEqual(values);
          if (k > 0 && k < n - 1) expect(e).toBeUndefined();
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("staticIfAffine", () => {
  it("turns a filled affine dynamic map into a static one", () => {
    const tile = variable("tile", { min: 0, max: 5 });
    const t = fillTable(
      lookupTable("peer", 6),
      [1, 2, 3, 0, 1, 2].map((v) => v),
    );
    const m = staticIfAffine(dynamicMap(t, tile));
    expect(m.kind).toBe("static");
    const irregular = dynamicMap(fillTable(lookupTable("peer", 6), [1, 0, 3, 2, 5, 4]), tile);
    expect(staticIfAffine(irregular)).toBe(irregular);
    expect(staticIfAffine(dynamicMap(lookupTable("peer", 6), tile)).kind).toBe("dynamic");
  });
});
