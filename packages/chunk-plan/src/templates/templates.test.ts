import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkPlan } from "../model/schema.js";
import { opAccesses } from "../plan/access.js";
import { PlanBuilder } from "../plan/builder.js";
import { PlanError } from "../plan/errors.js";
import { isDeeplyFrozen } from "../plan/frozen.js";
import { partition, regionsOverlap } from "../plan/shard.js";
import { validatePlan } from "../validate/index.js";
import {
  allGatherHierarchical,
  allGatherRing,
  allGatherSwizzle,
  allReducePartitioned,
  allReduceTilewise,
  allToAll,
  collectiveDirect,
  reduceScatterDirect,
  reduceScatterRing,
  tileRegions,
} from "./index.js";
import { elements, runPlan, type State } from "./oracle.test-util.js";

const RUNS = { numRuns: 25 };

interface Case {
  world: number;
  axis: number;
  splitAxis: number;
  split: number;
  shape: number[];
}

/** Random 2-D shapes (extents often not multiples of the world), world sizes 1..6, splits 1..3. */
const caseOf = (world: fc.Arbitrary<number>, divisible = false): fc.Arbitrary<Case> =>
  fc
    .record({ world, axis: fc.integer({ min: 0, max: 1 }), other: fc.boolean(), split: fc.integer({ min: 1, max: 3 }) })
    .chain(({ world, axis, other, split }) => {
      const minShard = other ? 1 : split;
      const extent = divisible
        ? fc.integer({ min: minShard, max: minShard + 2 }).map((k) => k * world)
        : fc.integer({ min: world * minShard, max: world * minShard + 7 });
      return fc.record({ extent, rest: fc.integer({ min: other ? split : 1, max: 5 }) }).map(({ extent, rest }) => ({
        world,
        axis,
        splitAxis: other ? 1 - axis : axis,
        split,
        shape: axis === 0 ? [extent, rest] : [rest, extent],
      }));
    });

const opsPerRank = (plan: ChunkPlan): number[] => plan.ranks.map((rp) => rp.streams.reduce((n, ops) => n + ops.length, 0));
const tensorOf = (c: Case) => ({ name: "A", shape: c.shape, dtype: "bf16" as const });

/** Index of the shard (of `world` along `axis`) holding flat element `e` of `shape`. */
function ownerOf(e: number, shape: number[], axis: number, world: number): number {
  const coord = axis === 0 ? Math.floor(e / shape[1]!) : e % shape[1]!;
  return partition(shape[axis]!, world).findIndex((s) => coord >= s.offset && coord < s.offset + s.size);
}

/** Every element of `tensor` on every listed rank holds exactly the contributions `expect` names. */
function expectCells(
  state: State,
  tensor: string,
  shape: number[],
  ranks: number[],
  wanted: (r: number, e: number) => { mask: number; pos: number } | undefined,
): void {
  const size = shape[0]! * shape[1]!;
  for (const r of ranks) {
    const buf = state.get(`${r}|${tensor}`) ?? [];
    for (let e = 0; e < size; e++) {
      const want = wanted(r, e);
      if (want !== undefined) expect(buf[e], `rank ${r} element ${e}`).toEqual(want);
    }
  }
}

/** The plain AllGather check: every rank receives every other shard exactly once, in place. */
function expectAllGather(plan: ChunkPlan, c: Case): void {
  const ranks = plan.ranks.map((rp) => rp.rank);
  // No op writes a rank's own shard (it is in place from the start).
  plan.ranks.forEach((rp, r) =>
    rp.streams.flat().forEach((op) => {
      const write = opAccesses(op, r)[1];
      for (const q of ranks) if (write.rank === q) expect(regionsOverlap(write.region, plan.ranks[q]!.local[0]!)).toBe(false);
    }),
  );
  // runPlan rejects a second write of an element and any read not ordered after its writer.
  const state = runPlan(plan);
  expectCells(state, "A", c.shape, ranks, (_, e) => {
    const owner = ownerOf(e, c.shape, c.axis, c.world);
    return { mask: 1 << owner, pos: e };
  });
  expect(validatePlan(plan)).toEqual({ ok: true });
}

function expectParses(plan: ChunkPlan): void {
  expect(ChunkPlan.parse(JSON.parse(JSON.stringify(plan)))).toEqual(plan);
}

describe("AllGather templates", () => {
  it("ring (push and pull): every shard arrives once, in place, after the op that forwards it", () => {
    fc.assert(
      fc.property(caseOf(fc.integer({ min: 1, max: 6 })), fc.constantFrom("push", "pull") as fc.Arbitrary<"push" | "pull">, (c, side) => {
        const plan = allGatherRing({ tensor: tensorOf(c), axis: c.axis, mesh: [c.world], split: c.split, splitAxis: c.splitAxis, side });
        expectParses(plan);
        expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => (c.world - 1) * c.split));
        expectAllGather(plan, c);
      }),
      RUNS,
    );
  });

  it("ring with split pipelines: chunk j of step k waits for chunk j of step k - 1 only", () => {
    const plan = allGatherRing({ tensor: { name: "A", shape: [12, 4], dtype: "fp16" }, axis: 0, mesh: [3], split: 2, side: "push" });
    expect(plan.ranks[1]!.streams[0]!.map((op) => op.deps)).toEqual([
      [],
      [],
      [{ kind: "op", rank: 0, stream: 0, index: 0 }],
      [{ kind: "op", rank: 0, stream: 0, index: 1 }],
    ]);
  });

  it("swizzle (pull and push): rank-rotated, step i reads from rank + i", () => {
    fc.assert(
      fc.property(caseOf(fc.integer({ min: 1, max: 6 })), fc.constantFrom("push", "pull") as fc.Arbitrary<"push" | "pull">, (c, side) => {
        const plan = allGatherSwizzle({ tensor: tensorOf(c), axis: c.axis, mesh: [c.world], split: c.split, splitAxis: c.splitAxis, side });
        expectParses(plan);
        expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => (c.world - 1) * c.split));
        if (side === "pull") {
          plan.ranks.forEach((rp, r) =>
            rp.streams[0]?.forEach((op, k) => expect(op.kind === "p2p" && op.peer).toBe((r + 1 + Math.floor(k / c.split)) % c.world)),
          );
        }
        expectAllGather(plan, c);
      }),
      RUNS,
    );
  });

  it("hierarchical (staged and pipelined) on [nodes, gpusPerNode]: (G - 1 + N - 1) * split ops per rank", () => {
    const meshArb = fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }));
    fc.assert(
      fc.property(
        meshArb.chain(([n, g]) => caseOf(fc.constant(n * g)).map((c) => ({ c, n, g }))),
        fc.constantFrom("staged", "pipelined") as fc.Arbitrary<"staged" | "pipelined">,
        ({ c, n, g }, schedule) => {
          const plan = allGatherHierarchical({
            tensor: tensorOf(c),
            axis: c.axis,
            mesh: [n, g],
            split: c.split,
            splitAxis: c.splitAxis,
            schedule,
          });
          expectParses(plan);
          expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => (g - 1 + n - 1) * c.split));
          if (schedule === "pipelined" && n > 1) expect(plan.ranks[0]!.streams[1]).toHaveLength((n - 1) * c.split);
          expectAllGather(plan, c);
        },
      ),
      RUNS,
    );
  });

  it("hierarchical plans hold their ops themselves: the plan the builder makes of them, sharing only frozen parts (property)", () => {
    const meshArb = fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 3 }));
    fc.assert(
      fc.property(
        meshArb.chain(([n, g]) => caseOf(fc.constant(n * g)).map((c) => ({ c, n, g }))),
        fc.constantFrom("staged", "pipelined") as fc.Arbitrary<"staged" | "pipelined">,
        ({ c, n, g }, schedule) => {
          const plan = allGatherHierarchical({
            tensor: tensorOf(c),
            axis: c.axis,
            mesh: [n, g],
            split: c.split,
            splitAxis: c.splitAxis,
            schedule,
          });
          const b = new PlanBuilder({ name: plan.name, mesh: plan.mesh });
          plan.tensors.forEach((t) => b.tensor(t));
          if (plan.claim !== undefined) b.claim(plan.claim);
          for (const rp of plan.ranks) {
            rp.local.forEach((region) => b.local(rp.rank, region));
            rp.streams.forEach((ops, s) => ops.forEach((op) => b.add(rp.rank, s, op)));
          }
          // Same JSON, key order included, as the builder's copy (which shares nothing).
          expect(JSON.stringify(plan)).toBe(JSON.stringify(b.build()));
          // Every op is its own object; any part of an op that another op (or the op itself,
          // src and dst) also holds is deeply frozen, so no op can change what another holds.
          const ops = new Set<object>();
          const holders = new Map<object, number>();
          for (const rp of plan.ranks) {
            for (const stream of rp.streams) {
              for (const op of stream) {
                expect(ops.has(op)).toBe(false);
                ops.add(op);
                for (const o of [op.src, op.dst, op.src.offsets, op.src.sizes, op.dst.offsets, op.dst.sizes, op.deps, ...op.deps]) {
                  holders.set(o, (holders.get(o) ?? 0) + 1);
                }
              }
            }
          }
          for (const [o, count] of holders) if (count > 1) expect(isDeeplyFrozen(o)).toBe(true);
        },
      ),
      RUNS,
    );
  });

  it("hierarchical scales to 1024 ranks with whole node blocks per inter-node op", () => {
    const tensor = { name: "A", shape: [8192, 1024], dtype: "bf16" as const };
    const plan = allGatherHierarchical({ tensor, axis: 0, mesh: [128, 8], split: 2, splitAxis: 1, schedule: "pipelined" });
    expect(plan.ranks).toHaveLength(1024);
    expect(opsPerRank(plan).every((n) => n === (7 + 127) * 2)).toBe(true);
    const inter = plan.ranks[9]!.streams[1]!;
    // Rank 9 = (node 1, gpu 1) pulls chunk 0 of node 2's block (shards 16..23, 8 rows each) from
    // rank 17, after rank 17's last intra-node op of chunk round 0.
    expect(inter[0]).toMatchObject({ peer: 17, src: { offsets: [128, 0], sizes: [64, 512] } });
    expect(inter[0]!.deps).toEqual([{ kind: "op", rank: 17, stream: 0, index: 6 }]);
  });

  it("rejects meshes that are not 2-level and shards that cannot be cut", () => {
    const tensor = { name: "A", shape: [8, 8], dtype: "bf16" as const };
    expect(() => allGatherHierarchical({ tensor, axis: 0, mesh: [8] })).toThrow(expect.objectContaining({ code: "invalid-mesh" }));
    expect(() => allGatherRing({ tensor, axis: 0, mesh: [9] })).toThrow(expect.objectContaining({ code: "extent-too-small" }));
    expect(() => allGatherRing({ tensor, axis: 0, mesh: [4], split: 3 })).toThrow(expect.objectContaining({ code: "region-too-small" }));
    expect(() => allGatherRing({ tensor, axis: 2, mesh: [4] })).toThrow(PlanError);
  });
});

describe("ReduceScatter and AllReduce templates", () => {
  const all = (world: number): number => (1 << world) - 1;

  it("ring and direct ReduceScatter: rank r's shard of the result sums every rank's partial", () => {
    fc.assert(
      fc.property(caseOf(fc.integer({ min: 1, max: 5 })), fc.boolean(), fc.boolean(), (c, ring, afterCompute) => {
        const make = ring ? reduceScatterRing : reduceScatterDirect;
        const plan = make({ tensor: tensorOf(c), axis: c.axis, mesh: [c.world], split: c.split, splitAxis: c.splitAxis, afterCompute });
        expectParses(plan);
        expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => c.world * c.split));
        const state = runPlan(plan);
        expectCells(
          state,
          "A",
          c.shape,
          plan.ranks.map((rp) => rp.rank),
          (r, e) => (ownerOf(e, c.shape, c.axis, c.world) === r ? { mask: all(c.world), pos: e } : undefined),
        );
        expect(validatePlan(plan)).toEqual({ ok: true });
      }),
      RUNS,
    );
  });

  it("partitioned AllReduce (every RS x AG variant): every rank ends with the full sum", () => {
    fc.assert(
      fc.property(
        caseOf(fc.integer({ min: 1, max: 5 })),
        fc.constantFrom("ring", "direct") as fc.Arbitrary<"ring" | "direct">,
        fc.constantFrom("ring-push", "ring-pull", "swizzle") as fc.Arbitrary<"ring-push" | "ring-pull" | "swizzle">,
        (c, reduceScatter, allGather) => {
          const plan = allReducePartitioned({
            tensor: tensorOf(c),
            axis: c.axis,
            mesh: [c.world],
            split: c.split,
            splitAxis: c.splitAxis,
            reduceScatter,
            allGather,
          });
          expectParses(plan);
          expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => (2 * c.world - 1) * c.split));
          const state = runPlan(plan);
          expectCells(
            state,
            "A",
            c.shape,
            plan.ranks.map((rp) => rp.rank),
            (_, e) => ({ mask: all(c.world), pos: e }),
          );
          expect(validatePlan(plan)).toEqual({ ok: true });
        },
      ),
      RUNS,
    );
  });

  it("tile-wise AllReduce: one reduction per output tile, each after that tile's compute event", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.tuple(fc.integer({ min: 2, max: 9 }), fc.integer({ min: 2, max: 9 })),
        fc.tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 4 })),
        fc.constantFrom("collective", "p2p") as fc.Arbitrary<"collective" | "p2p">,
        fc.integer({ min: 1, max: 2 }),
        (world, shape, tile, path, split) => {
          const tensor = { name: "A", shape, dtype: "fp32" as const };
          const tiles = tileRegions("A", shape, tile);
          const cut = split <= Math.min(...tiles.map((t) => t.sizes[0]!)) ? split : 1;
          const plan = allReduceTilewise({ tensor, mesh: [world], tile, path, split: cut });
          expectParses(plan);
          const perTile = path === "collective" ? 1 : world;
          expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => tiles.length * perTile * cut));
          // Every op reads only data whose compute event it waits for, on the rank holding it.
          plan.ranks.forEach((rp, r) =>
            rp.streams.flat().forEach((op) => {
              const read = opAccesses(op, r)[0];
              const covered = op.deps.some(
                (d) =>
                  d.kind === "compute" &&
                  d.rank === read.rank &&
                  elements(read.region, shape).every((e) => elements(d.region, shape).includes(e)),
              );
              expect(covered).toBe(true);
            }),
          );
          if (path === "p2p") {
            const state = runPlan(plan);
            expectCells(
              state,
              "A",
              shape,
              plan.ranks.map((rp) => rp.rank),
              (_, e) => ({ mask: all(world), pos: e }),
            );
          }
          expect(validatePlan(plan)).toEqual({ ok: true });
        },
      ),
      RUNS,
    );
  });
});

describe("AllToAll and the direct path", () => {
  it("AllToAll: slab p of rank r's result is slab r of rank p's input", () => {
    fc.assert(
      fc.property(caseOf(fc.integer({ min: 1, max: 5 }), true), (c) => {
        const plan = allToAll({ tensor: tensorOf(c), axis: c.axis, mesh: [c.world], split: c.split, splitAxis: c.splitAxis });
        expectParses(plan);
        expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => c.world * c.split));
        const slab = c.shape[c.axis]! / c.world;
        const state = runPlan(plan);
        expectCells(
          state,
          "A",
          c.shape,
          plan.ranks.map((rp) => rp.rank),
          (r, e) => {
            const coords = [Math.floor(e / c.shape[1]!), e % c.shape[1]!];
            const p = Math.floor(coords[c.axis]! / slab);
            coords[c.axis] = r * slab + (coords[c.axis]! % slab);
            return { mask: 1 << p, pos: coords[0]! * c.shape[1]! + coords[1]! };
          },
        );
        expect(validatePlan(plan)).toEqual({ ok: true });
      }),
      RUNS,
    );
    const tensor = { name: "A", shape: [10, 4], dtype: "bf16" as const };
    expect(() => allToAll({ tensor, axis: 0, mesh: [3] })).toThrow(expect.objectContaining({ code: "indivisible" }));
  });

  it("collectiveDirect: one collective op per rank, valid for each kind", () => {
    for (const kind of ["all-gather", "reduce-scatter", "all-reduce", "all-to-all"] as const) {
      for (const world of [1, 3, 5]) {
        const plan = collectiveDirect({
          collective: kind,
          tensor: { name: "A", shape: [world * 2, 3], dtype: "bf16" },
          axis: 0,
          mesh: [world],
        });
        expectParses(plan);
        expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => 1));
        expect(plan.claim?.collective).toBe(kind);
        expect(validatePlan(plan)).toEqual({ ok: true });
      }
    }
    expect(() =>
      collectiveDirect({ collective: "all-gather", tensor: { name: "A", shape: [7, 3], dtype: "bf16" }, axis: 0, mesh: [3] }),
    ).toThrow(expect.objectContaining({ code: "indivisible" }));
  });
});
