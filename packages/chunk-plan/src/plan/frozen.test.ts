// Frozen plan parts shared between ops (plan/frozen.ts) and the hierarchical AllGather that
// holds them: a plan built with sharing serialises as one built without, validates the same
// (fast and reference validators), and no op can change what another op holds.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkPlan, Dependency, Op, Region } from "../model/schema.js";
import { allGatherHierarchical } from "../templates/index.js";
import { validatePlan } from "../validate/index.js";
import { validatePlan as referenceValidatePlan } from "../validate/reference/validate.js";
import { cloneDependencies, clonePlan, cloneRegion } from "./clone.js";
import { frozenDependencies, frozenRegion, isDeeplyFrozen, NO_DEPENDENCIES } from "./frozen.js";

const RUNS = { numRuns: 60 };

const regionArb: fc.Arbitrary<Region> = fc.integer({ min: 1, max: 4 }).chain((dims) =>
  fc.record({
    tensor: fc.constantFrom("x", "y", "x_partial"),
    offsets: fc.array(fc.nat(64), { minLength: dims, maxLength: dims }),
    sizes: fc.array(fc.integer({ min: 1, max: 64 }), { minLength: dims, maxLength: dims }),
  }),
);

const depArb: fc.Arbitrary<Dependency> = fc.oneof(
  fc.record({ kind: fc.constant("op" as const), rank: fc.nat(8), stream: fc.nat(2), index: fc.nat(20) }),
  fc.record({ kind: fc.constant("compute" as const), rank: fc.nat(8), region: regionArb }),
);

const hierarchicalArb: fc.Arbitrary<ChunkPlan> = fc
  .record({
    nodes: fc.integer({ min: 1, max: 4 }),
    gpus: fc.integer({ min: 1, max: 4 }),
    rows: fc.integer({ min: 1, max: 4 }),
    cols: fc.integer({ min: 1, max: 3 }),
    split: fc.integer({ min: 1, max: 4 }),
    splitAxis: fc.constantFrom(0, 1),
    pipelined: fc.boolean(),
  })
  .map((c) => {
    const world = c.nodes * c.gpus;
    return allGatherHierarchical({
      tensor: { name: "x", shape: [world * c.rows, c.cols], dtype: "bf16" },
      axis: 0,
      mesh: [c.nodes, c.gpus],
      split: Math.min(c.split, c.splitAxis === 0 ? c.rows : c.cols),
      splitAxis: c.splitAxis,
      schedule: c.pipelined ? "pipelined" : "staged",
    });
  });

function opsOf(plan: ChunkPlan): Op[] {
  return plan.ranks.flatMap((rp) => rp.streams.flat());
}

/** Every object an op holds (its regions, their number lists, its dependency list and dependencies). */
function partsOf(op: Op): object[] {
  const parts: object[] = [op.src, op.src.offsets, op.src.sizes, op.dst, op.dst.offsets, op.dst.sizes, op.deps];
  for (const dep of op.deps) {
    parts.push(dep);
    if (dep.kind === "compute") parts.push(dep.region, dep.region.offsets, dep.region.sizes);
  }
  return parts;
}

/** The assignments a careless caller could make to a part of an op: each must throw. */
function tamper(part: object): void {
  if (Array.isArray(part)) (part as unknown[]).push(0);
  else (part as Record<string, unknown>).tensor = "tampered";
}

describe("frozen plan parts", () => {
  it("a frozen region or dependency list serialises as a copy, is deeply frozen and does not alias its source (property)", () => {
    fc.assert(
      fc.property(regionArb, fc.array(depArb, { maxLength: 3 }), (region, deps) => {
        const r = frozenRegion(region);
        const d = frozenDependencies(deps);
        expect(JSON.stringify(r)).toBe(JSON.stringify(cloneRegion(region)));
        expect(JSON.stringify(d)).toBe(JSON.stringify(cloneDependencies(deps)));
        expect(isDeeplyFrozen(r)).toBe(true);
        expect(isDeeplyFrozen(d)).toBe(true);
        const before = JSON.stringify([r, d]);
        // Changing the source later changes nothing in the frozen copies.
        region.offsets[0] = (region.offsets[0] ?? 0) + 1;
        for (const dep of deps) dep.rank += 1;
        expect(JSON.stringify([r, d])).toBe(before);
        // And the copies refuse every change (ES modules run in strict mode).
        expect(() => {
          r.offsets[0] = 7;
        }).toThrow(TypeError);
        expect(() => tamper(d)).toThrow(TypeError);
        if (d[0] !== undefined) expect(() => ((d[0] as { rank: number }).rank = 9)).toThrow(TypeError);
      }),
      RUNS,
    );
    expect(frozenDependencies([])).toBe(NO_DEPENDENCIES);
    expect(JSON.stringify(NO_DEPENDENCIES)).toBe("[]");
  });

  it("a hierarchical plan built with shared frozen parts serialises and validates as its unshared copy (property)", () => {
    fc.assert(
      fc.property(hierarchicalArb, (plan) => {
        const copy = clonePlan(plan);
        expect(JSON.stringify(plan)).toBe(JSON.stringify(copy));
        // The copy shares nothing: every part of every op is its own and can be edited.
        const seen = new Set<object>();
        for (const op of opsOf(copy)) {
          for (const part of [op, ...partsOf(op)]) {
            expect(seen.has(part)).toBe(false);
            seen.add(part);
            expect(Object.isFrozen(part)).toBe(false);
          }
        }
        const shared = validatePlan(plan);
        expect(shared).toEqual(validatePlan(copy));
        expect(shared).toEqual({ ok: true });
        expect(referenceValidatePlan(plan)).toEqual(shared);
      }),
      RUNS,
    );
  });

  it("no op of a hierarchical plan can change what another op holds (property)", () => {
    fc.assert(
      fc.property(hierarchicalArb, fc.nat(), fc.nat(), (plan, pick, partPick) => {
        const ops = opsOf(plan);
        if (ops.length === 0) return;
        const before = ops.map((op) => JSON.stringify(op));
        const op = ops[pick % ops.length]!;
        const parts = partsOf(op);
        const part = parts[partPick % parts.length]!;
        // A part held by more than one op (or twice by one op) is frozen: the change throws.
        const holders = ops.filter((o) => partsOf(o).includes(part)).length;
        const twice = parts.filter((p) => p === part).length > 1;
        if (holders > 1 || twice) expect(() => tamper(part)).toThrow(TypeError);
        else {
          try {
            tamper(part);
          } catch {
            // A frozen part of this op alone refuses the change too.
          }
          // A part this op holds alone changes this op only.
          ops.forEach((o, k) => {
            if (o !== op) expect(JSON.stringify(o)).toBe(before[k]);
          });
          return;
        }
        ops.forEach((o, k) => expect(JSON.stringify(o)).toBe(before[k]));
      }),
      RUNS,
    );
  });
});
