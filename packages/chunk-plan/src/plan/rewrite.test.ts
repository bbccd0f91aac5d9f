import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkPlan, DTYPE_BYTES, type Op } from "../model/schema.js";
import { allGatherRing, allGatherSwizzle, allReducePartitioned, reduceScatterDirect, reduceScatterRing } from "../templates/index.js";
import { runPlan } from "../templates/oracle.test-util.js";
import { validatePlan } from "../validate/index.js";
import { collective, computeDep, localCopy, opRef, PlanBuilder, push } from "./builder.js";
import { type Access, accessesConflict } from "./access.js";
import { conflictingPairs } from "./conflicts.js";
import { shardRegion } from "./shard.js";
import { split } from "./split.js";
import { assignStreams, roundRobin, type StreamPolicy } from "./streams.js";

const RUNS = { numRuns: 25 };

/** Unsplit template plans over random 2-D shapes (extent >= 3 * world on both axes, so any split <= 3 fits). */
const planArb: fc.Arbitrary<{ plan: ChunkPlan }> = fc
  .record({
    world: fc.integer({ min: 1, max: 5 }),
    rows: fc.integer({ min: 0, max: 6 }),
    cols: fc.integer({ min: 3, max: 7 }),
    which: fc.integer({ min: 0, max: 5 }),
  })
  .map(({ world, rows, cols, which }) => {
    const tensor = { name: "A", shape: [3 * world + rows, cols], dtype: "fp16" as const };
    const o = { tensor, axis: 0, mesh: [world] };
    const plans = [
      () => allGatherRing({ ...o, side: "push" }),
      () => allGatherRing({ ...o, side: "pull" }),
      () => allGatherSwizzle(o),
      () => reduceScatterRing({ ...o, afterCompute: true }),
      () => reduceScatterDirect(o),
      () => allReducePartitioned({ ...o, allGather: "ring-pull" }),
    ];
    return { plan: plans[which]!() };
  });

const ops = (plan: ChunkPlan): Op[] => plan.ranks.flatMap((rp) => rp.streams.flat());
const bytes = (plan: ChunkPlan): number => ops(plan).reduce((n, op) => n + op.dst.sizes.reduce((a, b) => a * b, 1) * DTYPE_BYTES.fp16, 0);
const withoutDeps = (op: Op): string => JSON.stringify({ ...op, deps: undefined, label: undefined });

describe("split", () => {
  it("cuts every transfer into n chunks, keeps bytes, and keeps the plan correct", () => {
    fc.assert(
      fc.property(planArb, fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 1 }), ({ plan }, n, axis) => {
        const cut = split(plan, n, axis);
        expect(ChunkPlan.parse(cut)).toEqual(cut);
        expect(ops(cut)).toHaveLength(ops(plan).length * n);
        expect(bytes(cut)).toBe(bytes(plan));
        // The chunks of each op are consecutive along the axis and cover it exactly.
        plan.ranks.forEach((rp, r) =>
          rp.streams.forEach((stream, s) =>
            stream.forEach((op, i) => {
              const pieces = cut.ranks[r]!.streams[s]!.slice(i * n, (i + 1) * n);
              let at = op.src.offsets[axis]!;
              for (const p of pieces) {
                expect(p.src.offsets[axis]).toBe(at);
                at += p.src.sizes[axis]!;
              }
              expect(at).toBe(op.src.offsets[axis]! + op.src.sizes[axis]!);
            }),
          ),
        );
        runPlan(cut);
        expect(validatePlan(cut)).toEqual({ ok: true });
      }),
      RUNS,
    );
  });

  const A = { name: "A", shape: [8, 4], dtype: "bf16" as const };
  const B = { name: "B", shape: [8, 4], dtype: "bf16" as const };
  const half = (i: number) => shardRegion(A, 0, 2, i);

  it("chunk j waits for chunk j only where regions correspond, else for the last chunk", () => {
    const b = new PlanBuilder({ name: "chain", mesh: [2] });
    b.tensor(A);
    const first = b.add(0, 0, push(1, half(0), half(0)));
    b.add(1, 0, localCopy(half(0), half(1), { deps: [first] })); // reads what `first` wrote
    b.add(1, 0, localCopy(half(1), half(1), { deps: [first] })); // touches nothing `first` touched
    const cut = split(b.build(), 2, 0);
    expect(cut.ranks[1]!.streams[0]!.map((op) => op.deps)).toEqual([
      [opRef(0, 0, 0)],
      [opRef(0, 0, 1)],
      [opRef(0, 0, 1)],
      [opRef(0, 0, 1)],
    ]);
  });

  it("narrows a compute dependency on the op's own region to each chunk's region", () => {
    const b = new PlanBuilder({ name: "tiles", mesh: [1] });
    b.tensor(A);
    b.tensor(B);
    const other = { tensor: "A", offsets: [0, 0], sizes: [1, 1] };
    b.add(0, 0, localCopy(half(0), { ...half(0), tensor: "B" }, { deps: [computeDep(0, half(0)), computeDep(0, other)] }));
    const cut = split(b.build(), 2, 1);
    expect(cut.ranks[0]!.streams[0]!.map((op) => op.deps)).toEqual([
      [computeDep(0, { tensor: "A", offsets: [0, 0], sizes: [4, 2] }), computeDep(0, other)],
      [computeDep(0, { tensor: "A", offsets: [0, 2], sizes: [4, 2] }), computeDep(0, other)],
    ]);
  });

  it("keeps collectives whole when the cut would break their slabs", () => {
    const b = new PlanBuilder({ name: "coll", mesh: [2] });
    b.tensor(A);
    for (const r of [0, 1]) {
      b.add(r, 0, collective("all-gather", [0, 1], 0, half(r), { tensor: "A", offsets: [0, 0], sizes: [8, 4] }));
      b.add(r, 0, collective("all-reduce", [0, 1], 0, half(r), half(r), { reduce: "sum" }));
    }
    const plan = b.build();
    expect(split(plan, 2, 0).ranks[0]!.streams[0]!.map((op) => (op.kind === "collective" ? op.collective : ""))).toEqual([
      "all-gather",
      "all-reduce",
      "all-reduce",
    ]);
    expect(split(plan, 2, 1).ranks[0]!.streams[0]).toHaveLength(4);
  });

  it("rejects bad factors, axes and regions smaller than the factor; drops signal tables", () => {
    const plan = allGatherRing({ tensor: A, axis: 0, mesh: [2] });
    expect(() => split(plan, 0, 0)).toThrow(expect.objectContaining({ code: "invalid-split" }));
    expect(() => split(plan, 1.5, 0)).toThrow(expect.objectContaining({ code: "invalid-split" }));
    expect(() => split(plan, 2, 2)).toThrow(expect.objectContaining({ code: "invalid-axis" }));
    expect(() => split(plan, 5, 0)).toThrow(expect.objectContaining({ code: "region-too-small" }));
    const signalled = { ...plan, signals: { slots: [], notify: [] } };
    expect(split(signalled, 2, 1).signals).toBeUndefined();
  });
});

const policyArb: fc.Arbitrary<StreamPolicy> = fc.oneof(
  fc.constant("single" as const),
  fc.constant("per-peer" as const),
  fc.integer({ min: 1, max: 4 }).map(roundRobin),
);

describe("assignStreams", () => {
  it("keeps each rank's multiset of ops, points every dependency at the same op, and stays correct", () => {
    fc.assert(
      fc.property(planArb, fc.integer({ min: 1, max: 2 }), policyArb, ({ plan }, n, policy) => {
        const before = split(plan, n, 1);
        const after = assignStreams(before, policy);
        expect(ChunkPlan.parse(after)).toEqual(after);
        before.ranks.forEach((rp, r) => {
          const mine = after.ranks[r]!.streams.flat();
          expect(mine.map(withoutDeps).sort()).toEqual(rp.streams.flat().map(withoutDeps).sort());
        });
        // Every original dependency survives, now naming the same op at its new place.
        before.ranks.forEach((rp, r) =>
          rp.streams.flat().forEach((op) =>
            op.deps.forEach((dep) => {
              if (dep.kind !== "op") return;
              const target = withoutDeps(before.ranks[dep.rank]!.streams[dep.stream]![dep.index]!);
              const moved = after.ranks[r]!.streams.flat().find((o) => withoutDeps(o) === withoutDeps(op))!;
              const names = moved.deps.flatMap((d) =>
                d.kind === "op" ? [withoutDeps(after.ranks[d.rank]!.streams[d.stream]![d.index]!)] : [],
              );
              expect(names).toContain(target);
            }),
          ),
        );
        if (policy === "single") expect(after.ranks.every((rp) => rp.streams.length === 1)).toBe(true);
        if (policy === "per-peer") {
          after.ranks.forEach((rp) =>
            rp.streams.forEach((s) => expect(new Set(s.map((op) => (op.kind === "p2p" ? op.peer : -1))).size).toBe(1)),
          );
        }
        runPlan(after);
        expect(validatePlan(after)).toEqual({ ok: true });
      }),
      RUNS,
    );
  });

  it("orders ops that shared a stream and touch the same data by an explicit dependency", () => {
    const A = { name: "A", shape: [8, 4], dtype: "bf16" as const };
    const b = new PlanBuilder({ name: "stage-then-send", mesh: [2] });
    b.tensor(A);
    b.local(0, shardRegion(A, 0, 2, 0));
    b.add(0, 0, localCopy(shardRegion(A, 0, 2, 0), shardRegion(A, 0, 2, 1)));
    b.add(0, 0, push(1, shardRegion(A, 0, 2, 1), shardRegion(A, 0, 2, 1)));
    const after = assignStreams(b.build(), "per-peer");
    expect(after.ranks[0]!.streams.map((s) => s.map((op) => op.kind))).toEqual([["local-copy"], ["p2p"]]);
    expect(after.ranks[0]!.streams[1]![0]!.deps).toEqual([opRef(0, 0, 0)]);
    expect(assignStreams(b.build(), roundRobin(3)).ranks[0]!.streams.map((s) => s.length)).toEqual([1, 1, 0]);
  });

  it("rejects a plan that deadlocks and an unknown policy", () => {
    const A = { name: "A", shape: [4], dtype: "bf16" as const };
    const b = new PlanBuilder({ name: "cycle", mesh: [2] });
    b.tensor(A);
    const r = { tensor: "A", offsets: [0], sizes: [1] };
    b.add(0, 0, push(1, r, r, { deps: [opRef(1, 0, 0)] }));
    b.add(1, 0, push(0, r, r, { deps: [opRef(0, 0, 0)] }));
    expect(() => assignStreams(b.build(), "single")).toThrow(expect.objectContaining({ code: "cycle" }));
    const ok = allGatherRing({ tensor: { name: "A", shape: [4], dtype: "bf16" }, axis: 0, mesh: [2] });
    expect(() => assignStreams(ok, "fastest" as StreamPolicy)).toThrow(expect.objectContaining({ code: "invalid-policy" }));
    expect(() => roundRobin(0)).toThrow(expect.objectContaining({ code: "invalid-option" }));
  });
});

describe("conflictingPairs", () => {
  it("finds exactly the pairs a pairwise comparison finds", () => {
    const accessArb: fc.Arbitrary<Access> = fc
      .record({
        rank: fc.integer({ min: 0, max: 1 }),
        tensor: fc.constantFrom("A", "B"),
        o0: fc.integer({ min: 0, max: 6 }),
        o1: fc.integer({ min: 0, max: 6 }),
        s0: fc.integer({ min: 1, max: 4 }),
        s1: fc.integer({ min: 1, max: 4 }),
        write: fc.boolean(),
      })
      .map(({ rank, tensor, o0, o1, s0, s1, write }) => ({ rank, write, region: { tensor, offsets: [o0, o1], sizes: [s0, s1] } }));
    fc.assert(
      fc.property(fc.array(fc.array(accessArb, { minLength: 1, maxLength: 2 }), { maxLength: 12 }), (lists) => {
        const brute: string[] = [];
        lists.forEach((mine, i) =>
          lists.slice(0, i).forEach((theirs, p) => {
            if (mine.some((a) => theirs.some((b) => accessesConflict(a, b)))) brute.push(`${p},${i}`);
          }),
        );
        expect(
          conflictingPairs(lists)
            .map(([p, i]) => `${p},${i}`)
            .sort(),
        ).toEqual(brute.sort());
      }),
      { numRuns: 100 },
    );
  });
});
