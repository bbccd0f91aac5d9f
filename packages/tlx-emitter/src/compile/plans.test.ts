// What compile() realises beyond push rings and swizzles (pull rings, hierarchical AllGather,
// plans with collective ops) and how it refuses the rest: a named reason and the nearest
// plan that works.
import {
  allGatherHierarchical,
  allGatherRing,
  allGatherSwizzle,
  collectiveDirect,
  computeDep,
  planSignals,
  reduceScatterDirect,
  reduceScatterRing,
  type ChunkPlan,
} from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { planHostOps, type PlanSignals } from "../schedule/host-ops.js";
import { Manifest } from "../core/manifest/schema.js";
import { EmitError } from "../core/writer/index.js";
import { builtinBody, compile, type Operator } from "../index.js";

const TILE = { BM: 64, BN: 64, BK: 32 };
const A = (M: number, K: number) => ({ name: "A", shape: [M, K], dtype: "bf16" as const });
const C = (M: number, N: number) => ({ name: "C", shape: [M, N], dtype: "bf16" as const });

function agOp(plan: ChunkPlan, M: number, N: number, K: number): Operator {
  return { name: "ag_gemm", kind: "ag-gemm", plan, body: builtinBody("gemm_tma_persistent"), problem: { M, N, K }, tile: TILE, groupM: 2 };
}

function rsOp(plan: ChunkPlan, M: number, N: number, K: number): Operator {
  return { name: "gemm_rs", kind: "gemm-rs", plan, body: builtinBody("gemm_producer"), problem: { M, N, K }, tile: TILE, groupM: 2 };
}

/** The error `f` throws (sync or async), as an EmitError. */
async function refusal(f: () => unknown): Promise<EmitError> {
  try {
    await f();
  } catch (e) {
    if (e instanceof EmitError) return e;
    throw e;
  }
  throw new Error("expected a refusal");
}

function waits(m: Manifest): { issuer: number; on: number | undefined }[] {
  return m.hostOps.flatMap((h) =>
    h.streams.flatMap((s) => s.ops.flatMap((o) => (o.kind === "wait" ? [{ issuer: h.rank, on: o.rank }] : []))),
  );
}

describe("compile() realises", () => {
  it("a pull ring AllGather, its forwarding steps waiting on the previous rank's slot", async () => {
    const plan = planSignals(allGatherRing({ tensor: A(256, 64), axis: 0, mesh: [4], split: 2, side: "pull" }));
    const r = await compile(agOp(plan, 256, 64, 64));
    expect(() => Manifest.parse(r.manifest)).not.toThrow();
    const w = waits(r.manifest);
    expect(w.length).toBe(4 * 2 * 2); // steps 2 and 3 of 4 ranks, 2 chunks each
    for (const { issuer, on } of w) expect(on).toBe((issuer + 3) % 4);
  });

  it("waits on the issuing rank's own slots without naming a rank (push ring manifests unchanged)", async () => {
    const plan = planSignals(allGatherRing({ tensor: A(256, 64), axis: 0, mesh: [4], split: 2, side: "push" }));
    const w = waits((await compile(agOp(plan, 256, 64, 64))).manifest);
    expect(w.length).toBeGreaterThan(0);
    expect(w.every((x) => x.on === undefined)).toBe(true);
  });

  it("a hierarchical AllGather on a [2, 2] and a [2, 3] mesh (world = product of the levels)", async () => {
    for (const [mesh, schedule] of [
      [[2, 2], "staged"],
      [[2, 3], "pipelined"],
    ] as const) {
      const world = mesh[0] * mesh[1];
      const M = world * 64;
      const plan = planSignals(allGatherHierarchical({ tensor: A(M, 64), axis: 0, mesh: [...mesh], split: 1, schedule }));
      const r = await compile(agOp(plan, M, 64, 64));
      expect(r.manifest.world).toBe(world);
      expect(r.manifest.hostOps.length).toBe(world);
      // Inter-node pulls wait on the same-GPU rank of the other node, which gathered that block.
      const w = waits(r.manifest);
      expect(w.length).toBeGreaterThan(0);
      for (const { issuer, on } of w) {
        expect(on).toBeDefined();
        expect(on! % mesh[1]).toBe(issuer % mesh[1]);
        expect(Math.floor(on! / mesh[1])).not.toBe(Math.floor(issuer / mesh[1]));
      }
    }
  });

  it("a direct AllGather collective, decomposed into pushes of each shard to every peer", async () => {
    const plan = planSignals(collectiveDirect({ tensor: A(192, 64), axis: 0, mesh: [3], collective: "all-gather" }));
    const r = await compile(agOp(plan, 192, 64, 64));
    for (const h of r.manifest.hostOps) {
      const copies = h.streams.flatMap((s) => s.ops).filter((o) => o.kind === "copy");
      expect(copies.map((o) => (o.kind === "copy" ? o.dst.rank : -1)).sort()).toEqual([0, 1, 2].filter((q) => q !== h.rank));
    }
  });

  it("a direct ReduceScatter collective under GEMM+RS, exactly as reduceScatterDirect({ afterCompute: true })", async () => {
    const o = { tensor: C(256, 128), src: "C_partial", axis: 0, mesh: [2] };
    const viaCollective = await compile(rsOp(planSignals(collectiveDirect({ ...o, collective: "reduce-scatter" })), 256, 128, 64));
    const viaTemplate = await compile(rsOp(planSignals(reduceScatterDirect({ ...o, afterCompute: true })), 256, 128, 64));
    expect(viaCollective.manifest).toEqual(viaTemplate.manifest);
    expect(viaCollective.files).toEqual(viaTemplate.files);
  });

  it("every pull ring and hierarchical shape compiles to a valid manifest whose remote waits name another rank (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          kind: fc.constantFrom("ring-pull", "hierarchical"),
          a: fc.integer({ min: 2, max: 3 }),
          b: fc.integer({ min: 1, max: 3 }),
          rowsPerRank: fc.integer({ min: 1, max: 3 }).map((x) => x * 32),
          split: fc.integer({ min: 1, max: 2 }),
        }),
        async ({ kind, a, b, rowsPerRank, split }) => {
          const mesh = kind === "ring-pull" ? [a * b] : [a, b];
          const world = a * b;
          const M = world * rowsPerRank;
          const o = { tensor: A(M, 64), axis: 0, mesh, split };
          const plan = planSignals(kind === "ring-pull" ? allGatherRing({ ...o, side: "pull" }) : allGatherHierarchical(o));
          const r = await compile(agOp(plan, M, 64, 64));
          expect(Manifest.safeParse(r.manifest).success).toBe(true);
          expect(r.manifest.world).toBe(world);
          for (const { issuer, on } of waits(r.manifest)) if (on !== undefined) expect(on).not.toBe(issuer);
        },
      ),
      { numRuns: 20 },
    );
  });
});

describe("compile() and the copy-engine backend refuse with the reason and the nearest plan that works", () => {
  const signalsOf = (p: ChunkPlan): PlanSignals => planSignals(p).signals!;

  it("a reduction under AllGather+GEMM: use reduceScatterDirect({ afterCompute: true }) for GEMM+RS, or a push AllGather", async () => {
    const plan = planSignals(reduceScatterDirect({ tensor: C(128, 64), axis: 0, mesh: [2] }));
    const e = await refusal(() => planHostOps(plan, signalsOf(plan)));
    expect(e.code).toBe("unsupported-op");
    expect(e.message).toMatch(/reduces \(sum\) into its destination, and a copy engine cannot add/);
    expect(e.message).toMatch(/reduceScatterDirect\(\{ afterCompute: true \}\).*allGatherRing\(\{ side: 'push' \}\)$/);
  });

  it("a copy waiting on compute: gather an operand that exists before the GEMM", async () => {
    const base = planSignals(allGatherSwizzle({ tensor: A(128, 64), axis: 0, mesh: [2], side: "push" }));
    const plan: ChunkPlan = {
      ...base,
      ranks: base.ranks.map((r) => ({ ...r, streams: r.streams.map((s) => s.map((o) => ({ ...o, deps: [computeDep(r.rank, o.src)] }))) })),
    };
    const e = await refusal(() => planHostOps(plan, base.signals!));
    expect(e.code).toBe("unsupported-dependency");
    expect(e.message).toMatch(/waits on compute/);
    expect(e.message).toMatch(
      /allGatherSwizzle\(\{ side: 'push' \}\).*reduceScatterDirect\(\{ afterCompute: true \}\) to send tiles as the GEMM finishes them$/,
    );
  });

  it("a slot with several writers: one op per destination chunk", async () => {
    const plan = planSignals(allGatherSwizzle({ tensor: A(128, 64), axis: 0, mesh: [2], side: "push" }));
    const s = plan.signals!;
    const doubled: PlanSignals = { ...s, slots: s.slots.map((e) => ({ ...e, slots: e.slots.map((x) => ({ ...x, arrivals: 2 })) })) };
    const e = await refusal(() => planHostOps(plan, doubled));
    expect(e.code).toBe("unsupported-op");
    expect(e.message).toMatch(/several writers.*as allGatherSwizzle\(\{ side: 'push' \}\) does$/);
  });

  it("a collective that reaches the backend undecomposed names the decomposition", async () => {
    const plan = planSignals(collectiveDirect({ tensor: A(128, 64), axis: 0, mesh: [2], collective: "all-gather" }));
    const e = await refusal(() => planHostOps(plan, plan.signals!));
    expect(e.code).toBe("unsupported-op");
    expect(e.message).toMatch(/all-gather collective.*decomposeCollectives.*allGatherSwizzle\(\{ side: 'push' \}\)$/);
  });

  it("a reduce-scatter collective under AllGather+GEMM: compile it as gemm-rs", async () => {
    const plan = planSignals(collectiveDirect({ tensor: C(128, 64), src: "C_partial", axis: 0, mesh: [2], collective: "reduce-scatter" }));
    const e = await refusal(() => compile(agOp(plan, 128, 64, 64)));
    expect(e.code).toBe("unsupported-op");
    expect(e.message).toMatch(
      /reduce-scatter collective in a ag-gemm operator.*cannot reduce.*use reduceScatterDirect\(\{ afterCompute: true \}\)$/,
    );
  });

  it("an all-reduce or all-to-all collective: the plans that work instead", async () => {
    const ar = planSignals(collectiveDirect({ tensor: C(128, 64), src: "C_partial", axis: 0, mesh: [2], collective: "all-reduce" }));
    const e1 = await refusal(() => compile(rsOp(ar, 128, 64, 64)));
    expect(e1.code).toBe("unsupported-op");
    expect(e1.message).toMatch(/all-reduce.*compile kind "gemm-ar" with allReducePartitioned\(.*\) or allReduceTilewise\(.*\)$/);
    // ... which compiles as GEMM+AllReduce (tile-wise).
    const ok = await compile({ ...rsOp(ar, 128, 64, 64), kind: "gemm-ar" });
    expect(ok.manifest.reference.operator).toBe("gemm-ar");
    const a2a = planSignals(collectiveDirect({ tensor: A(128, 64), axis: 0, mesh: [2], collective: "all-to-all" }));
    const e2 = await refusal(() => compile(agOp(a2a, 128, 64, 64)));
    expect(e2.code).toBe("unsupported-op");
    expect(e2.message).toMatch(/all-to-all.*collectiveDirect\(\{ collective: 'all-gather' \}\)$/);
  });

  it("a ring ReduceScatter under GEMM+RS (chained partial sums): use the direct one", async () => {
    const plan = planSignals(reduceScatterRing({ tensor: C(128, 64), src: "C_partial", axis: 0, mesh: [2], afterCompute: true }));
    const e = await refusal(() => compile(rsOp(plan, 128, 64, 64)));
    expect(["unsupported-dependency", "unsupported-op", "bad-plan"]).toContain(e.code);
    expect(e.message).toMatch(/reduceScatterDirect/);
  });
});
