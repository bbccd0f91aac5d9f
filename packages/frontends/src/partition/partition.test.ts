import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { meshRanks, type TensorDecl, validatePlan } from "@ovl/chunk-plan";
import { FrontendError } from "../errors.js";
import { emptyValues, regionIndices, runPlan } from "../execute.js";
import { inferCollective } from "./infer.js";
import { lowerReshard, partialName, type LoweringPath } from "./lower.js";
import { partialSum, rankRegion, replicate, shard, type ShardingSpec } from "./spec.js";

const T = (shape: number[]): TensorDecl => ({ name: "X", shape, dtype: "fp32" });

/** Global value of element `idx` of the tensor: distinct integers. */
const value = (idx: readonly number[]): number => idx.reduce((a, v) => a * 31 + v + 1, 7);

/** Checks, by executing the plan, that every rank ends with exactly `after`'s region of the tensor. */
function checkMovesData(tensor: TensorDecl, mesh: readonly number[], before: ShardingSpec, after: ShardingSpec, path: LoweringPath): void {
  const { plan } = lowerReshard({ tensor, mesh, before, after, path });
  const m = { shape: [...mesh] };
  const reducing = before.some((p) => p.kind === "partial");
  const partialOf = (r: number, idx: readonly number[]): number => value(idx) * (r + 1);
  const vals = emptyValues(plan, (r, t, idx) => {
    const held = rankRegion(tensor, m, before, r);
    const inside = idx.every((v, d) => v >= held.offsets[d]! && v < held.offsets[d]! + held.sizes[d]!);
    if (!inside) return undefined;
    if (reducing) return t.name === partialName(tensor.name) ? partialOf(r, idx) : undefined;
    return value(idx);
  });
  runPlan(plan, vals);
  for (const r of meshRanks(m)) {
    const target = rankRegion(tensor, m, after, r);
    const got = regionIndices(target, tensor.shape).map((i) => vals[r]!.get(tensor.name)![i]);
    const want = regionIndices(target, tensor.shape).map((flat) => {
      const idx = tensor.shape.map((_, d) => Math.floor(flat / tensor.shape.slice(d + 1).reduce((a, b) => a * b, 1)) % tensor.shape[d]!);
      if (!reducing) return value(idx);
      const group = meshRanks(m).filter((q) =>
        before.every(
          (p, a) =>
            p.kind === "partial" ||
            Math.floor(q / mesh.slice(a + 1).reduce((x, y) => x * y, 1)) % mesh[a]! ===
              Math.floor(r / mesh.slice(a + 1).reduce((x, y) => x * y, 1)) % mesh[a]!,
        ),
      );
      return group.reduce((acc, q) => acc + partialOf(q, idx), 0);
    });
    expect(got).toEqual(want);
  }
}

describe("inferCollective", () => {
  it("names the collective of each placement change", () => {
    const t = T([8, 4]);
    expect(inferCollective(t, { shape: [4] }, [shard(0)], [replicate()]).kind).toBe("all-gather");
    expect(inferCollective(t, { shape: [4] }, [partialSum()], [shard(1)])).toMatchObject({ kind: "reduce-scatter", dim: 1, reduce: "sum" });
    expect(inferCollective(t, { shape: [4] }, [partialSum()], [replicate()]).kind).toBe("all-reduce");
    expect(inferCollective(t, { shape: [4] }, [shard(0)], [shard(1)]).kind).toBe("all-to-all");
    expect(inferCollective(t, { shape: [2, 2] }, [shard(0), replicate()], [shard(0), shard(1)])).toMatchObject({
      kind: "slice",
      meshAxes: [1],
    });
    expect(inferCollective(t, { shape: [2, 2] }, [shard(0), partialSum()], [replicate(), shard(1)]).kind).toBe("mixed");
  });

  it("rejects a change that would invent values, and specs of the wrong length", () => {
    const t = T([8]);
    expect(() => inferCollective(t, { shape: [2] }, [replicate()], [partialSum()])).toThrow(FrontendError);
    try {
      inferCollective(t, { shape: [2, 2] }, [shard(0)], [replicate()]);
    } catch (e) {
      expect((e as FrontendError).code).toBe("invalid-spec");
    }
  });
});

describe("lowerReshard", () => {
  const cases: [string, ShardingSpec, ShardingSpec][] = [
    ["all-gather", [shard(0)], [replicate()]],
    ["reduce-scatter", [partialSum()], [shard(0)]],
    ["all-reduce", [partialSum()], [replicate()]],
  ];
  for (const [name, before, after] of cases) {
    for (const path of ["direct", "template", "synth"] as const) {
      it(`${name} by path ${path} validates and moves the data`, () => {
        const tensor = T([8, 3]);
        const { plan, implied } = lowerReshard({ tensor, mesh: [4], before, after, path });
        expect(implied.kind).toBe(name);
        expect(plan.claim?.collective).toBe(name);
        expect(validatePlan(plan)).toEqual({ ok: true });
        checkMovesData(tensor, [4], before, after, path);
      });
    }
  }

  it("uses the hierarchical template on a 2-level mesh", () => {
    const { plan } = lowerReshard({ tensor: T([8, 2]), mesh: [2, 2], before: [shard(0), shard(0)], after: [replicate(), replicate()] });
    expect(plan.name).toContain("hierarchical");
    expect(validatePlan(plan)).toEqual({ ok: true });
  });

  it("refuses all-to-all on the direct and template paths, and synthesises it", () => {
    const tensor = T([4, 4]);
    expect(() => lowerReshard({ tensor, mesh: [2], before: [shard(0)], after: [shard(1)], path: "direct" })).toThrow(/synth/);
    const { plan } = lowerReshard({ tensor, mesh: [2], before: [shard(0)], after: [shard(1)], path: "synth" });
    expect(validatePlan(plan)).toEqual({ ok: true });
    checkMovesData(tensor, [2], [shard(0)], [shard(1)], "synth");
  });

  it("synthesised reshards on random meshes and specs validate and deliver every target region (property)", () => {
    const placement = fc.oneof(fc.constant(replicate()), fc.integer({ min: 0, max: 1 }).map(shard));
    fc.assert(
      fc.property(
        fc.constantFrom([2], [3], [2, 2], [4], [2, 3]),
        fc.array(placement, { minLength: 2, maxLength: 2 }),
        fc.array(placement, { minLength: 2, maxLength: 2 }),
        (mesh, b, a) => {
          const before = b.slice(0, mesh.length);
          const after = a.slice(0, mesh.length);
          const tensor = T([12, 6]);
          const { plan } = lowerReshard({ tensor, mesh, before, after, path: "synth" });
          expect(validatePlan(plan)).toEqual({ ok: true });
          checkMovesData(tensor, mesh, before, after, "synth");
        },
      ),
      { numRuns: 40 },
    );
  });

  it("synthesises a reduction over one axis of a 2-D mesh (sub-mesh all-reduce)", () => {
    const tensor = T([4, 4]);
    const before: ShardingSpec = [shard(0), partialSum()];
    const after: ShardingSpec = [shard(0), replicate()];
    const { plan } = lowerReshard({ tensor, mesh: [2, 2], before, after, path: "synth" });
    expect(plan.claim).toBeUndefined();
    expect(validatePlan(plan)).toEqual({ ok: true });
    checkMovesData(tensor, [2, 2], before, after, "synth");
  });
});
