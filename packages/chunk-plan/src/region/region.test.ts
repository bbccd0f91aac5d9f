import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { DType, Region, TensorDecl } from "../model/schema.js";
import {
  RegionError,
  coverage,
  inBounds,
  intersect,
  regionBytes,
  regionVolume,
  sameShape,
  splitRegion,
  subtract,
  toByteSegments,
} from "./index.js";

const RUNS = { numRuns: 150 };

/** Every element of a box, as "i,j,k" keys: the brute-force reference. */
function elements(r: Region): string[] {
  const out: string[] = [];
  const walk = (d: number, prefix: number[]): void => {
    if (d === r.sizes.length) {
      out.push(prefix.join(","));
      return;
    }
    for (let i = 0; i < (r.sizes[d] ?? 0); i++) walk(d + 1, [...prefix, (r.offsets[d] ?? 0) + i]);
  };
  walk(0, []);
  return out;
}

/** Random shape (1–3 axes, extent 1–6) and boxes inside it. */
const shapeArb = fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 3 });
const boxIn = (shape: number[], tensor = "x"): fc.Arbitrary<Region> =>
  fc
    .tuple(...shape.map((extent) => fc.tuple(fc.integer({ min: 0, max: extent - 1 }), fc.integer({ min: 1, max: extent }))))
    .map((axes) => ({
      tensor,
      offsets: axes.map(([o]) => o),
      sizes: axes.map(([o, s], d) => Math.min(s, (shape[d] ?? 1) - o)),
    }));

describe("box algebra", () => {
  it("vol(a) = vol(a∩b) + Σ vol(a∖b), with disjoint pieces inside a and outside b", () => {
    fc.assert(
      fc.property(
        shapeArb.chain((shape) => fc.tuple(boxIn(shape), boxIn(shape))),
        ([a, b]) => {
          const common = intersect(a, b);
          const pieces = subtract(a, b);
          const vol = pieces.reduce((s, p) => s + regionVolume(p), 0) + (common ? regionVolume(common) : 0);
          expect(vol).toBe(regionVolume(a));
          const inA = new Set(elements(a));
          const inB = new Set(elements(b));
          const seen = new Set<string>();
          for (const p of pieces) {
            for (const e of elements(p)) {
              expect(inA.has(e)).toBe(true);
              expect(inB.has(e)).toBe(false);
              expect(seen.has(e)).toBe(false);
              seen.add(e);
            }
          }
          const expectedCommon = [...inA].filter((e) => inB.has(e));
          expect(common ? elements(common).sort() : []).toEqual(expectedCommon.sort());
        },
      ),
      RUNS,
    );
  });

  it("splitRegion covers the box exactly once with sizes differing by at most one", () => {
    fc.assert(
      fc.property(
        shapeArb.chain((shape) => fc.tuple(boxIn(shape), fc.nat(shape.length - 1), fc.integer({ min: 1, max: 6 }))),
        ([box, axis, n]) => {
          fc.pre(n <= (box.sizes[axis] ?? 0));
          const pieces = splitRegion(box, n, axis);
          expect(pieces).toHaveLength(n);
          expect(coverage(pieces, box)).toMatchObject({ exact: true, gaps: [], overlaps: [], outside: [] });
          const sizes = pieces.map((p) => p.sizes[axis] ?? 0);
          expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
          for (const p of pieces)
            expect(
              sameShape(
                { ...p, sizes: p.sizes.map((s, d) => (d === axis ? 0 : s)) },
                { ...box, sizes: box.sizes.map((s, d) => (d === axis ? 0 : s)) },
              ),
            ).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it("refuses splits that would make empty chunks or name a missing axis", () => {
    const r: Region = { tensor: "x", offsets: [0, 0], sizes: [3, 4] };
    expect(() => splitRegion(r, 4, 0)).toThrow(expect.objectContaining({ code: "bad-split" }));
    expect(() => splitRegion(r, 0, 1)).toThrow(RegionError);
    expect(() => splitRegion(r, 2, 2)).toThrow(expect.objectContaining({ code: "bad-axis" }));
    expect(splitRegion(r, 3, 1).map((p) => p.sizes[1])).toEqual([2, 1, 1]);
  });

  it("intersect is undefined for disjoint boxes and other tensors, and rejects mixed axes", () => {
    const a: Region = { tensor: "x", offsets: [0, 0], sizes: [2, 2] };
    expect(intersect(a, { tensor: "x", offsets: [2, 0], sizes: [2, 2] })).toBeUndefined();
    expect(intersect(a, { tensor: "y", offsets: [0, 0], sizes: [2, 2] })).toBeUndefined();
    expect(() => intersect(a, { tensor: "x", offsets: [0], sizes: [2] })).toThrow(expect.objectContaining({ code: "rank-mismatch" }));
  });

  it("inBounds and regionBytes follow the declaration", () => {
    const decl: TensorDecl = { name: "x", shape: [4, 8], dtype: "bf16" };
    expect(inBounds({ tensor: "x", offsets: [2, 0], sizes: [2, 8] }, decl)).toBe(true);
    expect(inBounds({ tensor: "x", offsets: [3, 0], sizes: [2, 8] }, decl)).toBe(false);
    expect(inBounds({ tensor: "x", offsets: [0], sizes: [4] }, decl)).toBe(false);
    expect(inBounds({ tensor: "y", offsets: [0, 0], sizes: [1, 1] }, decl)).toBe(false);
    expect(regionBytes({ tensor: "x", offsets: [0, 0], sizes: [2, 3] }, decl)).toBe(12);
    expect(() => regionBytes({ tensor: "y", offsets: [0, 0], sizes: [1, 1] }, decl)).toThrow(
      expect.objectContaining({ code: "tensor-mismatch" }),
    );
  });
});

describe("coverage", () => {
  it("reports gaps and overlaps that match brute-force counting", () => {
    fc.assert(
      fc.property(
        shapeArb.chain((shape) => fc.tuple(boxIn(shape), fc.array(boxIn(shape), { maxLength: 5 }))),
        ([target, regions]) => {
          const report = coverage(regions, target);
          const count = new Map<string, number>();
          for (const r of regions) for (const e of elements(r)) count.set(e, (count.get(e) ?? 0) + 1);
          const targetElems = elements(target);
          const gapElems = targetElems.filter((e) => (count.get(e) ?? 0) === 0).sort();
          const overlapElems = targetElems.filter((e) => (count.get(e) ?? 0) > 1).sort();
          expect(report.gaps.flatMap(elements).sort()).toEqual(gapElems);
          expect(report.overlaps.flatMap(elements).sort()).toEqual(overlapElems);
          expect(report.exact).toBe(gapElems.length === 0 && overlapElems.length === 0);
          const inTarget = new Set(targetElems);
          const outsideElems = regions.flatMap(elements).filter((e) => !inTarget.has(e));
          expect(report.outside.flatMap(elements).length).toBe(outsideElems.length);
        },
      ),
      RUNS,
    );
  });

  it("names the missing chunk as one box", () => {
    const target: Region = { tensor: "y", offsets: [0, 0], sizes: [8, 4] };
    const chunks = splitRegion(target, 4, 0);
    const report = coverage([chunks[0]!, chunks[1]!, chunks[3]!, chunks[3]!], target);
    expect(report.gaps).toEqual([{ tensor: "y", offsets: [4, 0], sizes: [2, 4] }]);
    expect(report.overlaps).toEqual([{ tensor: "y", offsets: [6, 0], sizes: [2, 4] }]);
  });
});

describe("toByteSegments", () => {
  const dtypeArb = fc.constantFrom<DType>("bf16", "fp32", "int8");
  /** A tensor with a random axis order and random padding per axis (never aliasing). */
  const declArb: fc.Arbitrary<TensorDecl> = fc
    .tuple(shapeArb, dtypeArb, fc.boolean())
    .chain(([shape, dtype, custom]) =>
      fc.tuple(
        fc.constant(shape),
        fc.constant(dtype),
        fc.constant(custom),
        fc.shuffledSubarray(
          shape.map((_, d) => d),
          { minLength: shape.length, maxLength: shape.length },
        ),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: shape.length, maxLength: shape.length }),
      ),
    )
    .map(([shape, dtype, custom, order, pads]) => {
      if (!custom) return { name: "x", shape, dtype };
      const strides = new Array<number>(shape.length).fill(1);
      let span = 1;
      for (const [i, d] of order.entries()) {
        strides[d] = span + (pads[i] ?? 0);
        span = (strides[d] ?? 1) * (shape[d] ?? 1);
      }
      return { name: "x", shape, dtype, strides };
    });

  it("cover exactly the box's bytes, sorted and maximal", () => {
    fc.assert(
      fc.property(
        declArb.chain((decl) => fc.tuple(fc.constant(decl), boxIn(decl.shape))),
        ([decl, box]) => {
          const elem = { bf16: 2, fp32: 4, int8: 1 }[decl.dtype as "bf16" | "fp32" | "int8"];
          const strides = decl.strides ?? decl.shape.map((_, d) => decl.shape.slice(d + 1).reduce((a, b) => a * b, 1));
          const expected = new Set<number>();
          for (const e of elements(box)) {
            const at = e.split(",").reduce((s, v, d) => s + Number(v) * (strides[d] ?? 0), 0) * elem;
            for (let b = 0; b < elem; b++) expected.add(at + b);
          }
          const segs = toByteSegments(box, decl);
          const got = new Set<number>();
          for (const s of segs) for (let b = 0; b < s.length; b++) got.add(s.offset + b);
          expect([...got].sort((x, y) => x - y)).toEqual([...expected].sort((x, y) => x - y));
          expect(segs.reduce((s, x) => s + x.length, 0)).toBe(expected.size);
          for (let i = 1; i < segs.length; i++) {
            expect(segs[i]!.offset).toBeGreaterThan(segs[i - 1]!.offset + segs[i - 1]!.length);
          }
        },
      ),
      RUNS,
    );
  });

  it("moves a slab of whole rows as one segment and a column block row by row", () => {
    const decl: TensorDecl = { name: "x", shape: [8, 16], dtype: "bf16" };
    expect(toByteSegments({ tensor: "x", offsets: [2, 0], sizes: [3, 16] }, decl)).toEqual([{ offset: 64, length: 96 }]);
    expect(toByteSegments({ tensor: "x", offsets: [0, 4], sizes: [2, 4] }, decl)).toEqual([
      { offset: 8, length: 8 },
      { offset: 40, length: 8 },
    ]);
  });

  it("rejects out-of-bounds boxes and aliasing strides", () => {
    const decl: TensorDecl = { name: "x", shape: [4, 4], dtype: "fp32" };
    expect(() => toByteSegments({ tensor: "x", offsets: [3, 0], sizes: [2, 4] }, decl)).toThrow(
      expect.objectContaining({ code: "out-of-bounds" }),
    );
    expect(() => toByteSegments({ tensor: "x", offsets: [0, 0], sizes: [1, 1] }, { ...decl, strides: [2, 1] })).toThrow(
      expect.objectContaining({ code: "bad-strides" }),
    );
  });
});
