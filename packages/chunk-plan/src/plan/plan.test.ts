import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkPlan } from "../model/schema.js";
import { computeDep, localCopy, PlanBuilder, pull, push } from "./builder.js";
import { PlanError } from "./errors.js";
import { meshCoords, rankOf, worldSize } from "./mesh.js";
import { partition, shardRegion, shardSpanRegion, splitChunks } from "./shard.js";

const RUNS = { numRuns: 50 };

describe("mesh", () => {
  it("rank and coordinates correspond row-major, outermost level first", () => {
    fc.assert(
      fc.property(
        fc
          .array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 4 })
          .chain((shape) => fc.tuple(fc.constant(shape), fc.integer({ min: 0, max: shape.reduce((a, b) => a * b, 1) - 1 }))),
        ([shape, rank]) => {
          const mesh = { shape };
          const coords = meshCoords(rank, mesh);
          expect(coords.every((c, l) => c >= 0 && c < shape[l]!)).toBe(true);
          expect(rankOf(coords, mesh)).toBe(rank);
        },
      ),
      RUNS,
    );
    expect(meshCoords(13, { shape: [4, 8] })).toEqual([1, 5]);
    expect(worldSize({ shape: [3, 5] })).toBe(15);
  });

  it("rejects ranks and coordinates outside the mesh", () => {
    expect(() => meshCoords(8, { shape: [2, 4] })).toThrow(expect.objectContaining({ code: "invalid-rank" }));
    expect(() => rankOf([0, 4], { shape: [2, 4] })).toThrow(expect.objectContaining({ code: "invalid-coords" }));
    expect(() => rankOf([0], { shape: [2, 4] })).toThrow(expect.objectContaining({ code: "invalid-coords" }));
    expect(() => worldSize({ shape: [0] })).toThrow(expect.objectContaining({ code: "invalid-mesh" }));
  });
});

describe("shards and chunks", () => {
  it("partition: consecutive, non-empty, sizes differ by at most one, larger first, exact cover", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }).chain((parts) => fc.tuple(fc.constant(parts), fc.integer({ min: parts, max: 500 }))),
        ([parts, extent]) => {
          const spans = partition(extent, parts);
          expect(spans).toHaveLength(parts);
          let at = 0;
          for (const s of spans) {
            expect(s.offset).toBe(at);
            expect(s.size).toBeGreaterThan(0);
            expect([Math.floor(extent / parts), Math.ceil(extent / parts)]).toContain(s.size);
            at += s.size;
          }
          expect(at).toBe(extent);
          expect(spans.map((s) => s.size)).toEqual([...spans.map((s) => s.size)].sort((a, b) => b - a));
        },
      ),
      RUNS,
    );
    expect(partition(10, 4).map((s) => s.size)).toEqual([3, 3, 2, 2]);
    expect(() => partition(3, 4)).toThrow(expect.objectContaining({ code: "extent-too-small" }));
  });

  it("shards of a tensor and node blocks are the spans of the partition", () => {
    const t = { name: "A", shape: [10, 7] };
    expect(shardRegion(t, 0, 4, 2)).toEqual({ tensor: "A", offsets: [6, 0], sizes: [2, 7] });
    expect(shardSpanRegion(t, 0, 4, 1, 2)).toEqual({ tensor: "A", offsets: [3, 0], sizes: [5, 7] });
    expect(splitChunks({ tensor: "A", offsets: [3, 2], sizes: [5, 5] }, 2, 1)).toEqual([
      { tensor: "A", offsets: [3, 2], sizes: [5, 3] },
      { tensor: "A", offsets: [3, 5], sizes: [5, 2] },
    ]);
    expect(() => splitChunks({ tensor: "A", offsets: [0], sizes: [2] }, 3, 0)).toThrow(
      expect.objectContaining({ code: "region-too-small" }),
    );
    expect(() => shardRegion(t, 2, 4, 0)).toThrow(expect.objectContaining({ code: "invalid-axis" }));
  });
});

describe("PlanBuilder", () => {
  const A = { name: "A", shape: [8, 4], dtype: "bf16" as const };

  it("returns op references usable as dependencies and builds a schema-valid plan", () => {
    const b = new PlanBuilder({ name: "pair", mesh: [2] });
    b.tensor(A);
    b.local(0, shardRegion(A, 0, 2, 0)).local(1, shardRegion(A, 0, 2, 1));
    const first = b.add(0, 0, push(1, shardRegion(A, 0, 2, 0), shardRegion(A, 0, 2, 0)));
    const second = b.add(1, 1, pull(0, shardRegion(A, 0, 2, 0), shardRegion(A, 0, 2, 0), { deps: [first], label: "late" }));
    expect(first).toEqual({ kind: "op", rank: 0, stream: 0, index: 0 });
    expect(second).toEqual({ kind: "op", rank: 1, stream: 1, index: 0 });
    const plan = b.build();
    expect(ChunkPlan.parse(plan)).toEqual(plan);
    expect(plan.ranks[1]!.streams).toEqual([[], [expect.objectContaining({ label: "late", deps: [first] })]]);
  });

  it("copies its inputs: later changes to them do not reach the plan", () => {
    const b = new PlanBuilder({ name: "copy", mesh: { shape: [1] } });
    b.tensor(A);
    const region = { tensor: "A", offsets: [0, 0], sizes: [4, 4] };
    b.add(0, 0, localCopy(region, { tensor: "A", offsets: [4, 0], sizes: [4, 4] }));
    region.offsets[0] = 2;
    expect(b.build().ranks[0]!.streams[0]![0]!.src.offsets).toEqual([0, 0]);
  });

  it("names the fault of a malformed plan", () => {
    const fault = (f: (b: PlanBuilder) => void): string => {
      const b = new PlanBuilder({ name: "bad", mesh: [2] });
      b.tensor(A);
      try {
        f(b);
        b.build();
      } catch (e) {
        expect(e).toBeInstanceOf(PlanError);
        return (e as PlanError).code;
      }
      return "built";
    };
    const r = (offsets: number[], sizes: number[], tensor = "A") => ({ tensor, offsets, sizes });
    expect(fault((b) => b.add(0, 0, push(2, r([0, 0], [1, 1]), r([0, 0], [1, 1]))))).toBe("invalid-rank");
    expect(fault((b) => b.add(0, 0, push(1, r([0, 0], [1, 1], "B"), r([0, 0], [1, 1]))))).toBe("unknown-tensor");
    expect(fault((b) => b.add(0, 0, push(1, r([7, 0], [2, 1]), r([0, 0], [2, 1]))))).toBe("out-of-bounds");
    expect(fault((b) => b.add(0, 0, push(1, r([0], [1]), r([0, 0], [1, 1]))))).toBe("shape-mismatch");
    expect(
      fault((b) => b.add(0, 0, push(1, r([0, 0], [1, 1]), r([0, 0], [1, 1]), { deps: [{ kind: "op", rank: 1, stream: 0, index: 0 }] }))),
    ).toBe("invalid-dependency");
    expect(fault((b) => b.add(0, 0, localCopy(r([0, 0], [1, 1]), r([1, 0], [1, 1]), { deps: [computeDep(3, r([0, 0], [1, 1]))] })))).toBe(
      "invalid-rank",
    );
    expect(fault((b) => b.tensor(A))).toBe("duplicate-tensor");
    expect(fault((b) => b.local(5, r([0, 0], [1, 1])))).toBe("invalid-rank");
    expect(fault(() => undefined)).toBe("built");
  });
});
