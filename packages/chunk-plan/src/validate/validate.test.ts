import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkPlan, type Op } from "../model/schema.js";
import { assertValidPlan, validatePlan, type PlanValidationCode } from "./index.js";
import { allGatherPlan, allGatherSpec, collectivePlan, opAddresses, reduceScatterPlan, removeOp } from "./random-plans.js";

const RUNS = { numRuns: 60 };

function codes(plan: ChunkPlan): PlanValidationCode[] {
  const result = validatePlan(plan);
  return result.ok ? [] : result.errors.map((e) => e.code);
}

/** Every generated plan must parse with the schema: the fixtures test real input. */
function parsed(plan: ChunkPlan): ChunkPlan {
  return ChunkPlan.parse(plan);
}

describe("validatePlan on random valid AllGather plans", () => {
  it("accepts ring and full-mesh plans, push and pull, any split and stream count", () => {
    fc.assert(
      fc.property(allGatherSpec, (spec) => {
        const result = validatePlan(parsed(allGatherPlan(spec)));
        expect(result.ok ? [] : result.errors.map((e) => e.message)).toEqual([]);
      }),
      RUNS,
    );
  });
});

describe("injected faults are caught with the right code", () => {
  const withOp = allGatherSpec.chain((spec) => {
    const plan = allGatherPlan(spec);
    return fc.tuple(fc.constant(plan), fc.constantFrom(...opAddresses(plan)));
  });

  it("a dropped transfer: missing-write naming the rank and region", () => {
    fc.assert(
      fc.property(withOp, ([plan, at]) => {
        const broken = removeOp(plan, at.rank, at.stream, at.index);
        const result = validatePlan(broken);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        const missing = result.errors.find((e) => e.code === "missing-write");
        expect(missing).toBeDefined();
        const target = at.op.kind === "p2p" && at.op.side === "push" ? at.op.peer : at.rank;
        expect(result.errors.some((e) => e.code === "missing-write" && e.rank === target && e.region?.tensor === "y")).toBe(true);
      }),
      RUNS,
    );
  });

  it("a duplicated write: duplicate-write at the copy", () => {
    fc.assert(
      fc.property(withOp, ([plan, at]) => {
        const broken = structuredClone(plan);
        const stream = broken.ranks[at.rank]!.streams[at.stream]!;
        stream.push(structuredClone(at.op));
        const result = validatePlan(broken);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        expect(result.errors.map((e) => e.code)).toContain("duplicate-write");
        const dup = result.errors.find((e) => e.code === "duplicate-write")!;
        expect([dup.rank, dup.stream, dup.index]).toEqual([at.rank, at.stream, stream.length - 1]);
      }),
      RUNS,
    );
  });

  it("a dependency cycle: deadlock listing the ops of the cycle", () => {
    fc.assert(
      fc.property(withOp, ([plan, at]) => {
        const stream = plan.ranks[at.rank]!.streams[at.stream]!;
        fc.pre(stream.length >= 2 && at.index < stream.length - 1);
        const broken = structuredClone(plan);
        const last = stream.length - 1;
        broken.ranks[at.rank]!.streams[at.stream]![at.index]!.deps.push({ kind: "op", rank: at.rank, stream: at.stream, index: last });
        const result = validatePlan(broken);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        const deadlock = result.errors.find((e) => e.code === "deadlock");
        expect(deadlock?.cycle).toBeDefined();
        const cycle = deadlock!.cycle!.map((r) => `${r.rank}/${r.stream}/${r.index}`);
        expect(cycle).toContain(`${at.rank}/${at.stream}/${at.index}`);
        expect(cycle).toContain(`${at.rank}/${at.stream}/${last}`);
      }),
      RUNS,
    );
  });

  it("an out-of-bounds region: out-of-bounds at that op", () => {
    fc.assert(
      fc.property(withOp, fc.boolean(), ([plan, at], onSrc) => {
        const broken = structuredClone(plan);
        const op = broken.ranks[at.rank]!.streams[at.stream]![at.index]!;
        const region = onSrc ? op.src : op.dst;
        const extent = broken.tensors.find((t) => t.name === region.tensor)!.shape[0]!;
        region.offsets[0] = extent - (region.sizes[0] ?? 1) + 1;
        const result = validatePlan(broken);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        expect(result.errors[0]).toMatchObject({ code: "out-of-bounds", rank: at.rank, stream: at.stream, index: at.index });
      }),
      RUNS,
    );
  });

  it("a dependency on a missing op: missing-dep", () => {
    fc.assert(
      fc.property(withOp, fc.nat(3), ([plan, at], which) => {
        const broken = structuredClone(plan);
        const op = broken.ranks[at.rank]!.streams[at.stream]![at.index]!;
        const len = plan.ranks[0]!.streams[0]!.length;
        const bad = [
          { kind: "op" as const, rank: 0, stream: 0, index: len },
          { kind: "op" as const, rank: 0, stream: 5, index: 0 },
          { kind: "op" as const, rank: 0, stream: 0, index: len + 10 },
          { kind: "op" as const, rank: plan.ranks.length + 2, stream: 0, index: 0 },
        ][which]!;
        op.deps.push(bad);
        const result = validatePlan(broken);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        expect(result.errors[0]).toMatchObject({
          code: which === 3 ? "rank-out-of-mesh" : "missing-dep",
          rank: at.rank,
          stream: at.stream,
          index: at.index,
        });
      }),
      RUNS,
    );
  });

  it("a read before write: a ring forward without its dependency", () => {
    const ring = allGatherSpec.filter((s) => s.world >= 3).map((s) => ({ ...s, topology: "ring" as const }));
    fc.assert(
      fc.property(
        ring.chain((spec) => {
          const plan = allGatherPlan(spec);
          return fc.tuple(fc.constant(plan), fc.constantFrom(...opAddresses(plan).filter((a) => a.op.deps.length > 0)));
        }),
        ([plan, at]) => {
          const broken = structuredClone(plan);
          broken.ranks[at.rank]!.streams[at.stream]![at.index]!.deps = [];
          const result = validatePlan(broken);
          expect(result.ok).toBe(false);
          if (result.ok) return;
          expect(result.errors.map((e) => e.code)).toEqual(["read-before-write"]);
          expect(result.errors[0]).toMatchObject({ rank: at.rank, stream: at.stream, index: at.index });
        },
      ),
      RUNS,
    );
  });

  it("a read of data nobody ever delivers: read-before-write", () => {
    const plan = allGatherPlan({ world: 3, shard: [2, 2], split: 1, topology: "ring", side: "push", streams: 1, outOfPlace: false });
    const broken = structuredClone(plan);
    broken.ranks[0]!.local = [];
    expect(codes(broken)).toContain("read-before-write");
  });
});

describe("validatePlan never throws on schema-valid input", () => {
  /** Overwrites one numeric field somewhere in the plan with a small random value. */
  const mutation = fc.record({
    path: fc.array(fc.nat(40), { minLength: 1, maxLength: 6 }),
    value: fc.integer({ min: 0, max: 12 }),
  });

  /** Valid plans of every kind the fixtures build: p2p AllGathers, direct collectives, reductions. */
  const anyPlan: fc.Arbitrary<ChunkPlan> = fc.oneof(
    allGatherSpec.map(allGatherPlan),
    fc
      .tuple(
        fc.constantFrom("all-gather" as const, "reduce-scatter" as const, "all-reduce" as const, "all-to-all" as const),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 3 }),
      )
      .map(([kind, world, rows]) => collectivePlan(kind, world, rows)),
    fc
      .tuple(fc.integer({ min: 2, max: 5 }), fc.integer({ min: 1, max: 3 }), fc.boolean())
      .map(([world, rows, noSeedDep]) => reduceScatterPlan(world, rows, { noSeedDep })),
  );

  function mutate(plan: ChunkPlan, path: number[], value: number): unknown {
    const copy: unknown = structuredClone(plan);
    let node: unknown = copy;
    for (const step of path) {
      if (node === null || typeof node !== "object") break;
      const keys = Object.keys(node);
      if (keys.length === 0) break;
      const key = keys[step % keys.length]!;
      const child = (node as Record<string, unknown>)[key];
      if (typeof child === "number") {
        (node as Record<string, unknown>)[key] = value;
        return copy;
      }
      node = child;
    }
    return copy;
  }

  it("returns findings, never an exception, for mutated plans", () => {
    let rejected = 0;
    fc.assert(
      fc.property(anyPlan, fc.array(mutation, { minLength: 1, maxLength: 4 }), (plan, mutations) => {
        let input: unknown = plan;
        for (const m of mutations) input = mutate(input as ChunkPlan, m.path, m.value);
        const parsedInput = ChunkPlan.safeParse(input);
        fc.pre(parsedInput.success);
        if (!parsedInput.success) return;
        let result: ReturnType<typeof validatePlan> | undefined;
        expect(() => (result = validatePlan(parsedInput.data))).not.toThrow();
        if (result?.ok === false) rejected++;
      }),
      { numRuns: 150 },
    );
    // The mutations must reach the error paths, not only harmless fields.
    expect(rejected).toBeGreaterThan(20);
  });
});

describe("structure", () => {
  const base = allGatherPlan({ world: 2, shard: [2, 4], split: 1, topology: "full-mesh", side: "pull", streams: 1, outOfPlace: false });

  it("rejects duplicated tensors, unknown tensors, rank mismatches, p2p to self and misordered ranks", () => {
    const dupTensor = structuredClone(base);
    dupTensor.tensors.push(structuredClone(dupTensor.tensors[0]!));
    expect(codes(dupTensor)).toContain("duplicate-tensor");

    const unknown = structuredClone(base);
    unknown.ranks[0]!.streams[0]![0]!.src.tensor = "z";
    expect(codes(unknown)).toEqual(["unknown-tensor"]);

    const axes = structuredClone(base);
    axes.ranks[0]!.streams[0]![0]!.dst = { tensor: "y", offsets: [0], sizes: [2] };
    expect(codes(axes)).toContain("rank-mismatch");

    const self = structuredClone(base);
    (self.ranks[1]!.streams[0]![0] as Op & { peer: number }).peer = 1;
    expect(codes(self)).toContain("p2p-self");

    const order = structuredClone(base);
    order.ranks.reverse();
    expect(codes(order)).toContain("rank-plan-order");

    const missing = structuredClone(base);
    missing.ranks.pop();
    expect(codes(missing)).toEqual(["rank-plan-order"]);

    const peer = structuredClone(base);
    (peer.ranks[0]!.streams[0]![0] as Op & { peer: number }).peer = 9;
    expect(codes(peer)).toContain("rank-out-of-mesh");
  });

  it("rejects shape and dtype mismatches and a claim its tensors cannot carry", () => {
    const shape = structuredClone(base);
    shape.ranks[0]!.streams[0]![0]!.dst.sizes = [1, 4];
    expect(codes(shape)).toEqual(["shape-mismatch"]);

    const dtype = structuredClone(base);
    dtype.tensors.push({ name: "w", shape: [4, 4], dtype: "fp32" });
    dtype.ranks[0]!.streams[0]![0]!.dst.tensor = "w";
    expect(codes(dtype)).toContain("dtype-mismatch");

    const claim = structuredClone(base);
    claim.claim = { collective: "all-gather", tensor: "y", axis: 0, ranks: [0, 1, 2] };
    expect(codes(claim)).toEqual(["bad-claim"]);
  });

  it("assertValidPlan throws an InvalidPlanError carrying the findings", () => {
    const broken = removeOp(base, 0, 0, 0);
    expect(() => assertValidPlan(broken)).toThrow(
      expect.objectContaining({
        code: "invalid-plan",
        errors: expect.arrayContaining([expect.objectContaining({ code: "missing-write" })]),
      }),
    );
    expect(() => assertValidPlan(base)).not.toThrow();
  });
});
