// planSignals finds transit slots through an interval index of each rank's forwarded reads;
// this checks it against the definition, read by read: a chunk slot is transit when some
// op that moves data off its rank reads a region overlapping the slot's region and is not
// one of the slot's writers.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkPlan, Op, Region } from "../model/schema.js";
import { allGatherHierarchical, allGatherRing, allReducePartitioned, allToAll, reduceScatterRing } from "../templates/index.js";
import { allGatherPlan, allGatherSpec, collectivePlan } from "../validate/random-plans.js";
import { planSignals } from "./index.js";
import { regionsIntersect } from "./regions.js";

interface Ref {
  rank: number;
  stream: number;
  index: number;
}

function ops(plan: ChunkPlan): { op: Op; ref: Ref }[] {
  return plan.ranks.flatMap((rp) =>
    rp.streams.flatMap((s, stream) => s.map((op, index) => ({ op, ref: { rank: rp.rank, stream, index } }))),
  );
}

/** The purposes of every rank's chunk slots, straight from the definition (quadratic). */
function referencePurposes(plan: ChunkPlan): string[][] {
  const all = ops(plan);
  const landsOn = (op: Op, rank: number): number => (op.kind === "p2p" && op.side === "push" ? op.peer : rank);
  const readsOff = (op: Op, rank: number): number | undefined =>
    op.kind === "p2p" ? (op.side === "push" ? rank : op.peer) : op.kind === "collective" && op.ranks.length > 1 ? rank : undefined;
  const same = (a: Region, b: Region): boolean =>
    a.tensor === b.tensor && a.offsets.join() === b.offsets.join() && a.sizes.join() === b.sizes.join();
  return (plan.signals?.slots ?? []).map(({ rank, slots }) =>
    slots
      .filter((s) => s.purpose !== "tile-done")
      .map((slot) => {
        const region = slot.region;
        if (region === undefined) return slot.purpose;
        const writers = all.filter(({ op, ref }) => landsOn(op, ref.rank) === rank && same(op.dst, region)).map(({ ref }) => ref);
        const transit = all.some(
          ({ op, ref }) =>
            readsOff(op, ref.rank) === rank &&
            regionsIntersect(op.src, region) &&
            !writers.some((w) => w.rank === ref.rank && w.stream === ref.stream && w.index === ref.index),
        );
        return transit ? "transit" : "chunk-ready";
      }),
  );
}

function chunkPurposes(plan: ChunkPlan): string[][] {
  return (plan.signals?.slots ?? []).map(({ slots }) => slots.filter((s) => s.purpose !== "tile-done").map((s) => s.purpose));
}

const plans: fc.Arbitrary<ChunkPlan> = fc.oneof(
  allGatherSpec.map(allGatherPlan),
  fc
    .record({
      kind: fc.constantFrom("all-gather" as const, "reduce-scatter" as const, "all-reduce" as const, "all-to-all" as const),
      world: fc.integer({ min: 2, max: 4 }),
      rows: fc.integer({ min: 1, max: 3 }),
    })
    .map((c) => collectivePlan(c.kind, c.world, c.rows)),
  fc
    .record({
      nodes: fc.integer({ min: 1, max: 3 }),
      gpus: fc.integer({ min: 1, max: 3 }),
      rows: fc.integer({ min: 1, max: 3 }),
      cols: fc.integer({ min: 1, max: 3 }),
      split: fc.integer({ min: 1, max: 3 }),
      splitAxis: fc.constantFrom(0, 1),
      pipelined: fc.boolean(),
    })
    .map((c) =>
      allGatherHierarchical({
        tensor: { name: "x", shape: [c.nodes * c.gpus * c.rows, c.cols], dtype: "bf16" },
        axis: 0,
        mesh: [c.nodes, c.gpus],
        split: Math.min(c.split, c.splitAxis === 0 ? c.rows : c.cols),
        splitAxis: c.splitAxis,
        schedule: c.pipelined ? "pipelined" : "staged",
      }),
    ),
  fc.record({ world: fc.integer({ min: 1, max: 4 }), split: fc.integer({ min: 1, max: 2 }), push: fc.boolean() }).map((c) =>
    allGatherRing({
      tensor: { name: "x", shape: [c.world * 2, 3], dtype: "fp16" },
      axis: 0,
      mesh: [c.world],
      split: c.split,
      side: c.push ? "push" : "pull",
    }),
  ),
  fc
    .record({ world: fc.integer({ min: 1, max: 4 }), split: fc.integer({ min: 1, max: 2 }) })
    .map((c) =>
      reduceScatterRing({ tensor: { name: "y", shape: [c.world * 2, 2], dtype: "fp32" }, axis: 0, mesh: [c.world], split: c.split }),
    ),
  fc
    .record({ world: fc.integer({ min: 1, max: 4 }), split: fc.integer({ min: 1, max: 2 }) })
    .map((c) =>
      allReducePartitioned({ tensor: { name: "y", shape: [c.world * 2, 2], dtype: "fp32" }, axis: 0, mesh: [c.world], split: c.split }),
    ),
  fc
    .record({ world: fc.integer({ min: 1, max: 4 }), split: fc.integer({ min: 1, max: 2 }) })
    .map((c) =>
      allToAll({ tensor: { name: "z", shape: [c.world * c.world * 2, 2], dtype: "fp16" }, axis: 0, mesh: [c.world], split: c.split }),
    ),
);

describe("planSignals: transit slots", () => {
  it("are exactly the chunk slots some other op reads from to move data off the rank", () => {
    fc.assert(
      fc.property(plans, (plan) => {
        const signalled = planSignals(plan);
        expect(chunkPurposes(signalled)).toEqual(referencePurposes(signalled));
      }),
      { numRuns: 80 },
    );
  });
});
