// The validator's fast path (per-op arrays, interned region boxes, cut-index tables, CSR
// built without an edge list, array caches per claim target) against the straightforward
// reference in ./reference: on random small plans, valid or broken on purpose (dropped,
// doubled or moved transfers, reductions where none belong, dependency cycles, missing
// dependencies, shifted copies), both must report exactly the same findings, in the same
// order, with the same messages and addresses.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkPlan, Dependency, Op } from "../model/schema.js";
import { allGatherHierarchical, allGatherRing, allReducePartitioned, allToAll, reduceScatterRing } from "../templates/index.js";
import { validatePlan, type PlanValidation } from "./index.js";
import { allGatherPlan, allGatherSpec, collectivePlan, opAddresses, reduceScatterPlan, removeOp } from "./random-plans.js";
import { validatePlan as referenceValidatePlan } from "./reference/validate.js";

const RUNS = { numRuns: 80 };

/** Findings as plain data (an Error's own fields), so equality covers every one of them. */
function findings(result: PlanValidation): unknown[] {
  if (result.ok) return [];
  return result.errors.map((e) => ({
    name: e.name,
    code: e.code,
    message: e.message,
    rank: e.rank,
    stream: e.stream,
    index: e.index,
    region: e.region,
    cycle: e.cycle,
  }));
}

function sameFindings(plan: ChunkPlan, maxErrors?: number): void {
  const options = maxErrors === undefined ? {} : { maxErrors };
  const fast = validatePlan(plan, options);
  const reference = referenceValidatePlan(plan, options);
  expect(findings(fast)).toEqual(findings(reference));
  expect(fast.ok).toBe(reference.ok);
}

/** One deliberate fault, applied to a copy of `plan` at op `at` (and, for some, op `other`). */
type Fault =
  | "none"
  | "drop"
  | "double"
  | "reduce"
  | "cycle"
  | "no-deps"
  | "dst-of-other"
  | "shift"
  | "self-dep"
  | "extra-dep"
  | "drop-dep"
  | "earlier-dep";
const FAULTS: readonly Fault[] = [
  "none",
  "drop",
  "double",
  "reduce",
  "cycle",
  "no-deps",
  "dst-of-other",
  "shift",
  "self-dep",
  "extra-dep",
  "drop-dep",
  "earlier-dep",
];

interface At {
  rank: number;
  stream: number;
  index: number;
}

function opAt(plan: ChunkPlan, at: At): Op {
  return plan.ranks[at.rank]!.streams[at.stream]![at.index]!;
}

function broken(plan: ChunkPlan, fault: Fault, at: At, other: At): ChunkPlan {
  if (fault === "drop") return removeOp(plan, at.rank, at.stream, at.index);
  const copy = structuredClone(plan);
  const op = opAt(copy, at);
  const ops = copy.ranks[at.rank]!.streams[at.stream]!;
  switch (fault) {
    case "none":
      break;
    case "double":
      // The same transfer again at the end of its stream: its destination is written twice.
      ops.push(structuredClone(op));
      break;
    case "reduce":
      if (op.kind !== "collective") op.reduce = "sum";
      break;
    case "cycle": {
      // Wait on the last op of the stream, which runs after this one.
      const last = ops.length - 1;
      op.deps.push({ kind: "op", rank: at.rank, stream: at.stream, index: last });
      break;
    }
    case "self-dep":
      op.deps.push({ kind: "op", rank: at.rank, stream: at.stream, index: at.index });
      break;
    case "no-deps":
      // Every op loses its cross-stream ordering: reads race with the writes they forward.
      for (const rp of copy.ranks) for (const s of rp.streams) for (const o of s) o.deps = [];
      break;
    case "dst-of-other": {
      const target = opAt(copy, other);
      if (op.kind !== "collective" && target.kind !== "collective" && sameShape(op, target)) op.dst = structuredClone(target.dst);
      break;
    }
    case "shift": {
      // Copy to a place one element further along axis 0 when it stays inside the tensor:
      // a translation, whose cuts the atom grid must carry.
      const extent = copy.tensors.find((t) => t.name === op.dst.tensor)?.shape[0] ?? 0;
      if (op.kind !== "collective" && (op.dst.offsets[0] ?? 0) + (op.dst.sizes[0] ?? 0) < extent)
        op.dst.offsets[0] = (op.dst.offsets[0] ?? 0) + 1;
      break;
    }
    case "extra-dep": {
      const dep: Dependency = { kind: "op", rank: other.rank, stream: other.stream, index: other.index };
      op.deps.push(dep);
      break;
    }
    case "drop-dep":
      // One op loses its cross-stream ordering, the others keep theirs.
      op.deps = [];
      break;
    case "earlier-dep":
      // Each dependency moves to the op before it in the same stream: earlier writes stay
      // ordered before the reader, the latest of that stream may not (the race check asks
      // only the latest writer of a stream when all are ordered, and every writer otherwise).
      for (const dep of op.deps) if (dep.kind === "op" && dep.index > 0) dep.index -= 1;
      break;
  }
  return copy;
}

function sameShape(a: Op, b: Op): boolean {
  return a.dst.tensor === b.dst.tensor && a.dst.sizes.length === b.dst.sizes.length && a.dst.sizes.every((s, d) => s === b.dst.sizes[d]);
}

/** A plan with two of its op addresses (the fault's site and a second op). */
function withSites(plan: ChunkPlan): fc.Arbitrary<[ChunkPlan, At, At, Fault]> {
  const sites = opAddresses(plan).map(({ rank, stream, index }) => ({ rank, stream, index }));
  return fc.tuple(fc.constant(plan), fc.constantFrom(...sites), fc.constantFrom(...sites), fc.constantFrom(...FAULTS));
}

const templatePlan: fc.Arbitrary<ChunkPlan> = fc.oneof(
  fc
    .record({
      nodes: fc.integer({ min: 1, max: 3 }),
      gpus: fc.integer({ min: 1, max: 3 }),
      rows: fc.integer({ min: 1, max: 3 }),
      cols: fc.integer({ min: 1, max: 3 }),
      split: fc.integer({ min: 1, max: 3 }),
      // Chunks cut across columns are boxes that are not one range of atom ids.
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
    }),
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

const handPlan: fc.Arbitrary<ChunkPlan> = fc.oneof(
  allGatherSpec.map(allGatherPlan),
  fc
    .record({ world: fc.integer({ min: 2, max: 5 }), rows: fc.integer({ min: 1, max: 3 }), drop: fc.boolean(), noSeedDep: fc.boolean() })
    .map((c) =>
      reduceScatterPlan(c.world, c.rows, { ...(c.drop ? { dropFrom: [1, 0] as [number, number] } : {}), noSeedDep: c.noSeedDep }),
    ),
  fc
    .record({
      kind: fc.constantFrom("all-gather" as const, "reduce-scatter" as const, "all-reduce" as const, "all-to-all" as const),
      world: fc.integer({ min: 2, max: 4 }),
      rows: fc.integer({ min: 1, max: 3 }),
    })
    .map((c) => collectivePlan(c.kind, c.world, c.rows)),
);

/** Plans with at least one op, then one fault. */
const faulty = (plans: fc.Arbitrary<ChunkPlan>): fc.Arbitrary<ChunkPlan> =>
  plans
    .filter((p) => opAddresses(p).length > 0)
    .chain(withSites)
    .map(([plan, at, other, fault]) => broken(plan, fault, at, other));

describe("the validator's fast path reports what the reference reports", () => {
  it("on hand-built plans (AllGather rings and meshes, ReduceScatter, direct collectives), valid or broken", () => {
    fc.assert(
      fc.property(faulty(handPlan), (plan) => sameFindings(plan)),
      RUNS,
    );
  });

  it("on template plans (hierarchical and ring AllGather, ReduceScatter, AllReduce, AllToAll), valid or broken", () => {
    fc.assert(
      fc.property(faulty(templatePlan), (plan) => sameFindings(plan)),
      RUNS,
    );
  });

  it("on boxes that are not one range of atom ids (node blocks cut across columns)", () => {
    const crossCut = fc
      .record({
        nodes: fc.integer({ min: 2, max: 3 }),
        gpus: fc.integer({ min: 2, max: 3 }),
        rows: fc.integer({ min: 1, max: 2 }),
        cols: fc.integer({ min: 2, max: 4 }),
        pipelined: fc.boolean(),
      })
      .chain((c) => fc.integer({ min: 2, max: c.cols }).map((split) => ({ ...c, split })))
      .map((c) =>
        allGatherHierarchical({
          tensor: { name: "x", shape: [c.nodes * c.gpus * c.rows, c.cols], dtype: "bf16" },
          axis: 0,
          mesh: [c.nodes, c.gpus],
          split: c.split,
          splitAxis: 1,
          schedule: c.pipelined ? "pipelined" : "staged",
        }),
      );
    fc.assert(
      fc.property(faulty(crossCut), (plan) => sameFindings(plan)),
      { numRuns: 40 },
    );
  });

  it("on an op that reads the writes of more ops than the race check lists by scanning", () => {
    // A full-mesh AllGather over 17-20 ranks and one more op on rank 0, first or last in its
    // stream, that copies the whole gathered tensor: it reads atoms written by 16 or more
    // ops, ordered after them (last, one stream), before them (first), or not at all (two streams).
    const wide = fc
      .record({
        world: fc.integer({ min: 17, max: 20 }),
        split: fc.integer({ min: 1, max: 2 }),
        streams: fc.constantFrom(1 as const, 2 as const),
        first: fc.boolean(),
      })
      .map((c) => {
        const plan = allGatherPlan({
          world: c.world,
          shard: [2],
          split: c.split,
          topology: "full-mesh",
          side: "pull",
          streams: c.streams,
          outOfPlace: false,
        });
        const y = plan.tensors.find((t) => t.name === "y")!;
        const whole = (tensor: string) => ({ tensor, offsets: y.shape.map(() => 0), sizes: [...y.shape] });
        plan.tensors.push({ ...y, name: "z", shape: [...y.shape] });
        const copy: Op = { kind: "local-copy", src: whole("y"), dst: whole("z"), deps: [] };
        const stream = plan.ranks[0]!.streams[0]!;
        if (!c.first) stream.push(copy);
        else {
          stream.unshift(copy);
          for (const rp of plan.ranks)
            for (const s of rp.streams)
              for (const op of s) for (const d of op.deps) if (d.kind === "op" && d.rank === 0 && d.stream === 0) d.index += 1;
        }
        return plan;
      });
    fc.assert(
      fc.property(faulty(wide), (plan) => sameFindings(plan)),
      { numRuns: 30 },
    );
  });

  it("with few findings allowed (the cut-off lands at the same finding)", () => {
    fc.assert(
      fc.property(faulty(fc.oneof(handPlan, templatePlan)), fc.integer({ min: 1, max: 3 }), (plan, max) => sameFindings(plan, max)),
      RUNS,
    );
  });

  it("on plans with two faults at once", () => {
    const twice = faulty(fc.oneof(handPlan, templatePlan))
      .filter((p) => opAddresses(p).length > 0)
      .chain(withSites)
      .map(([plan, at, other, fault]) => broken(plan, fault, at, other));
    fc.assert(
      fc.property(twice, (plan) => sameFindings(plan)),
      RUNS,
    );
  });
});
