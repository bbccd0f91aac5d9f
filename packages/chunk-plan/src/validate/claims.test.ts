import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CHUNK_PLAN_SCHEMA, ChunkPlan, type Op, type Region } from "../model/schema.js";
import { splitRegion } from "../region/box.js";
import * as templates from "../templates/index.js";
import { validatePlan } from "./index.js";
import { allGatherPlan, box, collectivePlan, reduceScatterPlan } from "./random-plans.js";

function findings(plan: ChunkPlan): { code: string; message: string; rank?: number | undefined }[] {
  const result = validatePlan(ChunkPlan.parse(plan));
  return result.ok ? [] : result.errors.map((e) => ({ code: e.code, message: e.message, rank: e.rank }));
}

describe("symbolic execution proves the claim", () => {
  it("accepts every direct collective and rejects a wrong axis size or a missing call", () => {
    for (const kind of ["all-gather", "reduce-scatter", "all-reduce", "all-to-all"] as const) {
      for (const world of [1, 2, 3, 5]) {
        expect(findings(collectivePlan(kind, world, 2))).toEqual([]);
      }
      const missing = collectivePlan(kind, 3, 2);
      missing.ranks[2]!.streams[0] = [];
      expect(findings(missing).map((f) => f.code)).toContain("collective-mismatch");
    }
    const shape = collectivePlan("all-gather", 3, 2);
    shape.tensors[1]!.shape = [7, 2];
    for (const rp of shape.ranks) (rp.streams[0]![0]!.dst as Region).sizes = [5, 2];
    expect(findings(shape).map((f) => f.code)).toContain("collective-shape");
  });

  it("proves a hand-built ReduceScatter and names the missing contributor", () => {
    expect(findings(reduceScatterPlan(4, 2))).toEqual([]);
    const dropped = findings(reduceScatterPlan(4, 2, { dropFrom: [3, 1] }));
    expect(dropped).toHaveLength(1);
    expect(dropped[0]).toMatchObject({ code: "claim-mismatch", rank: 1 });
    expect(dropped[0]!.message).toContain("sum of {the initial part of rank 0");
    expect(dropped[0]!.message).not.toMatch(/holds sum of \{[^}]*rank 3/);
  });

  it("reports a reduction racing with the write it combines into", () => {
    expect(findings(reduceScatterPlan(3, 1, { noSeedDep: true })).map((f) => f.code)).toContain("write-race");
  });

  it("reports the shard a rank holds instead of the right one", () => {
    const plan = allGatherPlan({ world: 4, shard: [2, 3], split: 1, topology: "full-mesh", side: "pull", streams: 1, outOfPlace: true });
    const op = plan.ranks[0]!.streams[0]!.find((o) => o.kind === "p2p" && o.peer === 1) as Op & { peer: number };
    op.peer = 2;
    const result = findings(plan);
    expect(result).toHaveLength(1);
    expect(result[0]).toMatchObject({ code: "claim-mismatch", rank: 0 });
    expect(result[0]!.message).toContain("y[2:4, 0:3] holds the initial x of rank 2, shifted by [2, 0]");
  });

  it("tracks copies between differently cut places (cuts carried across translations)", () => {
    // Rank 0 stages its shard in `t` at an offset, in two pieces, then copies it to `y` whole.
    const staged: ChunkPlan = {
      $schema: CHUNK_PLAN_SCHEMA,
      name: "staged",
      mesh: { shape: [2] },
      tensors: [
        { name: "y", shape: [6], dtype: "int8" },
        { name: "t", shape: [10], dtype: "int8" },
      ],
      claim: { collective: "all-gather", tensor: "y", axis: 0, ranks: [0, 1] },
      ranks: [
        {
          rank: 0,
          local: [box("y", [0], [3])],
          streams: [
            [
              { kind: "local-copy", src: box("y", [0], [1]), dst: box("t", [5], [1]), deps: [] },
              { kind: "local-copy", src: box("y", [1], [2]), dst: box("t", [6], [2]), deps: [] },
              { kind: "p2p", side: "push", peer: 1, src: box("t", [5], [3]), dst: box("y", [0], [3]), deps: [] },
            ],
          ],
        },
        {
          rank: 1,
          local: [box("y", [3], [3])],
          streams: [[{ kind: "p2p", side: "push", peer: 0, src: box("y", [3], [3]), dst: box("y", [3], [3]), deps: [] }]],
        },
      ],
    };
    expect(findings(staged)).toEqual([]);
    const swapped = structuredClone(staged);
    swapped.ranks[0]!.streams[0]![1]!.src = box("y", [0], [2]);
    swapped.ranks[0]!.streams[0]![0]!.src = box("y", [2], [1]);
    const result = findings(swapped);
    expect(result.map((f) => f.code)).toEqual(["claim-mismatch", "claim-mismatch"]);
    expect(result[0]!.message).toMatch(/rank 1: y\[0:1\] holds the initial y of rank 0, shifted by \[-2\] but/);
    expect(result[1]!.message).toMatch(/rank 1: y\[1:3\] holds the initial y of rank 0, shifted by \[1\] but/);
  });
});

describe("termination", () => {
  it("validates a copy that overlaps itself with a shift (cuts at every element)", () => {
    const plan: ChunkPlan = {
      $schema: CHUNK_PLAN_SCHEMA,
      name: "shifted",
      mesh: { shape: [1] },
      tensors: [{ name: "y", shape: [64], dtype: "int8" }],
      ranks: [
        {
          rank: 0,
          local: [box("y", [0], [63])],
          streams: [[{ kind: "local-copy", src: box("y", [0], [63]), dst: box("y", [1], [63]), deps: [] }]],
        },
      ],
    };
    expect(validatePlan(plan)).toEqual({ ok: true });
  });
});

describe("deadlocks across ranks", () => {
  it("finds a cycle through a collective that two ranks reach in different orders", () => {
    const ranks = [0, 1];
    const ag: Op = {
      kind: "collective",
      collective: "all-gather",
      ranks,
      axis: 0,
      src: box("x", [0], [2]),
      dst: box("y", [0], [4]),
      deps: [],
    };
    const plan: ChunkPlan = {
      $schema: CHUNK_PLAN_SCHEMA,
      name: "crossed",
      mesh: { shape: [2] },
      tensors: [
        { name: "x", shape: [2], dtype: "bf16" },
        { name: "y", shape: [4], dtype: "bf16" },
        { name: "z", shape: [2], dtype: "bf16" },
      ],
      ranks: [
        {
          rank: 0,
          local: [box("x", [0], [2])],
          streams: [[ag, { kind: "p2p", side: "push", peer: 1, src: box("x", [0], [2]), dst: box("z", [0], [2]), deps: [] }]],
        },
        {
          rank: 1,
          local: [box("x", [0], [2])],
          streams: [
            [
              {
                kind: "local-copy",
                src: box("z", [0], [2]),
                dst: box("y", [0], [2]),
                deps: [{ kind: "op", rank: 0, stream: 0, index: 1 }],
              },
              ag,
            ],
          ],
        },
      ],
    };
    const result = validatePlan(plan);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    const deadlock = result.errors.find((e) => e.code === "deadlock");
    expect(deadlock?.cycle?.length).toBeGreaterThanOrEqual(2);
  });
});

describe("template plans validate", () => {
  const tensor = (rows: number) => ({ name: "y", shape: [rows, 4], dtype: "bf16" as const });
  it("ring, swizzled and hierarchical AllGather, ReduceScatter, AllReduce and AllToAll", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 0, max: 5 }),
        fc.boolean(),
        (world, split, extra, push) => {
          const side = push ? ("push" as const) : ("pull" as const);
          const rows = world * split * 2 + extra;
          const plans: ChunkPlan[] = [
            templates.allGatherRing({ tensor: tensor(rows), axis: 0, mesh: [world], split, side }),
            templates.allGatherSwizzle({ tensor: tensor(rows), axis: 0, mesh: [world], split, side }),
            templates.allGatherHierarchical({ tensor: tensor(rows * 2), axis: 0, mesh: [2, world], split }),
            templates.allGatherHierarchical({ tensor: tensor(rows * 2), axis: 0, mesh: [2, world], split, schedule: "pipelined" }),
            templates.reduceScatterRing({ tensor: tensor(rows), axis: 0, mesh: [world], split }),
            templates.reduceScatterDirect({ tensor: tensor(rows), axis: 0, mesh: [world], split }),
            templates.allReducePartitioned({ tensor: tensor(rows), axis: 0, mesh: [world], split }),
            templates.allToAll({ tensor: tensor(world * world * split), axis: 0, mesh: [world], split }),
          ];
          for (const plan of plans) {
            const result = validatePlan(plan);
            expect(result.ok ? [] : result.errors.map((e) => `${plan.name}: ${e.message}`)).toEqual([]);
          }
        },
      ),
      { numRuns: 15 },
    );
  });

  it("catches a dropped transfer in a template plan", () => {
    const plan = templates.allGatherHierarchical({ tensor: tensor(32), axis: 0, mesh: [2, 2], split: 2 });
    const ops = plan.ranks[3]!.streams[0]!;
    ops.splice(ops.length - 1, 1);
    const result = validatePlan(plan);
    expect(result.ok ? [] : result.errors.map((e) => e.code)).toContain("missing-write");
  });
});

describe("splitRegion-based plans", () => {
  it("ragged shards follow the balanced partition in claims", () => {
    // 7 rows over 3 ranks: shards of 3, 2, 2 rows, gathered full-mesh by push.
    const shards = splitRegion(box("y", [0, 0], [7, 2]), 3, 0);
    const plan: ChunkPlan = {
      $schema: CHUNK_PLAN_SCHEMA,
      name: "ragged",
      mesh: { shape: [3] },
      tensors: [{ name: "y", shape: [7, 2], dtype: "bf16" }],
      claim: { collective: "all-gather", tensor: "y", axis: 0, ranks: [0, 1, 2] },
      ranks: [0, 1, 2].map((r) => ({
        rank: r,
        local: [shards[r]!],
        streams: [
          [0, 1, 2]
            .filter((p) => p !== r)
            .map((p): Op => ({ kind: "p2p", side: "push", peer: p, src: shards[r]!, dst: shards[r]!, deps: [] })),
        ],
      })),
    };
    expect(findings(plan)).toEqual([]);
  });
});
