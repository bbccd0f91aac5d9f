// The two-level templates on random meshes [nodes, gpusPerNode], shapes and splits: each is
// checked by the reference executor (every element exactly once, every read after its writer)
// and by validatePlan's symbolic execution against its claim, and moves across nodes only what
// its algorithm says.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChunkPlan } from "../model/schema.js";
import { opAccesses } from "../plan/access.js";
import { partition } from "../plan/shard.js";
import { validatePlan } from "../validate/index.js";
import { allGatherHierarchical, reduceScatterHierarchical } from "./index.js";
import { runPlan } from "./oracle.test-util.js";

const RUNS = { numRuns: 30 };

interface MeshCase {
  n: number;
  g: number;
  axis: number;
  splitAxis: number;
  split: number;
  shape: number[];
}

/** Meshes up to 3 × 3, 2-D shapes (extents often not multiples of the world), splits 1..3 along either axis. */
const meshCase: fc.Arbitrary<MeshCase> = fc
  .record({
    n: fc.integer({ min: 1, max: 3 }),
    g: fc.integer({ min: 1, max: 3 }),
    axis: fc.integer({ min: 0, max: 1 }),
    other: fc.boolean(),
    split: fc.integer({ min: 1, max: 3 }),
  })
  .chain(({ n, g, axis, other, split }) => {
    const world = n * g;
    const minShard = other ? 1 : split;
    return fc
      .record({
        extent: fc.integer({ min: world * minShard, max: world * minShard + 7 }),
        rest: fc.integer({ min: other ? split : 1, max: 4 }),
      })
      .map(({ extent, rest }) => ({
        n,
        g,
        axis,
        splitAxis: other ? 1 - axis : axis,
        split,
        shape: axis === 0 ? [extent, rest] : [rest, extent],
      }));
  });

const ownerOf = (e: number, c: MeshCase): number => {
  const coord = c.axis === 0 ? Math.floor(e / c.shape[1]!) : e % c.shape[1]!;
  return partition(c.shape[c.axis]!, c.n * c.g).findIndex((s) => coord >= s.offset && coord < s.offset + s.size);
};
const opsPerRank = (plan: ChunkPlan): number[] => plan.ranks.map((rp) => rp.streams.reduce((k, ops) => k + ops.length, 0));
/** Elements each rank receives over the network (reads from a rank of another node). */
function networkElements(plan: ChunkPlan, g: number): number[] {
  return plan.ranks.map((rp) =>
    rp.streams.flat().reduce((acc, op) => {
      const [read, write] = opAccesses(op, rp.rank);
      const crosses = Math.floor(read.rank / g) !== Math.floor(write.rank / g);
      return crosses ? acc + op.src.sizes.reduce((a, b) => a * b, 1) : acc;
    }, 0),
  );
}
const expectParses = (plan: ChunkPlan): void => expect(ChunkPlan.parse(JSON.parse(JSON.stringify(plan)))).toEqual(plan);

describe("hierarchical AllGather, inter-node first", () => {
  it("every shard arrives once, in place, after its writer; the claim holds; (N - 1 + (G - 1) · N) · split ops", () => {
    fc.assert(
      fc.property(meshCase, fc.constantFrom("staged", "pipelined") as fc.Arbitrary<"staged" | "pipelined">, (c, schedule) => {
        const tensor = { name: "A", shape: c.shape, dtype: "bf16" as const };
        const plan = allGatherHierarchical({
          tensor,
          axis: c.axis,
          mesh: [c.n, c.g],
          split: c.split,
          splitAxis: c.splitAxis,
          schedule,
          order: "inter-node-first",
        });
        expectParses(plan);
        expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => (c.n - 1 + (c.g - 1) * c.n) * c.split));
        const state = runPlan(plan);
        const size = c.shape[0]! * c.shape[1]!;
        for (const rp of plan.ranks) {
          const buf = state.get(`${rp.rank}|A`) ?? [];
          for (let e = 0; e < size; e++) expect(buf[e], `rank ${rp.rank} element ${e}`).toEqual({ mask: 1 << ownerOf(e, c), pos: e });
        }
        expect(validatePlan(plan)).toEqual({ ok: true });
      }),
      RUNS,
    );
  });

  it("moves 1/G of the intra-node-first order's bytes over the network: only the rank's own rail", () => {
    fc.assert(
      fc.property(meshCase, (c) => {
        const tensor = { name: "A", shape: c.shape, dtype: "bf16" as const };
        const base = { tensor, axis: c.axis, mesh: [c.n, c.g], split: c.split, splitAxis: c.splitAxis };
        const inter = networkElements(allGatherHierarchical({ ...base, order: "inter-node-first" }), c.g);
        const intra = networkElements(allGatherHierarchical(base), c.g);
        const spans = partition(c.shape[c.axis]!, c.n * c.g);
        const other = c.shape[1 - c.axis]!;
        inter.forEach((got, r) => {
          const node = Math.floor(r / c.g);
          // Shards (m, g) of every other node m: one shard per node, over the rank's own rail.
          let want = 0;
          for (let m = 0; m < c.n; m++) if (m !== node) want += spans[m * c.g + (r % c.g)]!.size * other;
          expect(got).toBe(want);
          // The intra-node-first order pulls every other node's whole block.
          let blocks = 0;
          for (let q = 0; q < c.n * c.g; q++) if (Math.floor(q / c.g) !== node) blocks += spans[q]!.size * other;
          expect(intra[r]).toBe(blocks);
        });
      }),
      RUNS,
    );
  });
});

describe("hierarchical ReduceScatter", () => {
  it("symbolic execution yields exactly the reduce-scatter: rank r's shard sums every rank's partial once (property)", () => {
    fc.assert(
      fc.property(
        meshCase,
        fc.constantFrom("staged", "pipelined") as fc.Arbitrary<"staged" | "pipelined">,
        fc.boolean(),
        (c, schedule, afterCompute) => {
          const tensor = { name: "A", shape: c.shape, dtype: "bf16" as const };
          const plan = reduceScatterHierarchical({
            tensor,
            axis: c.axis,
            mesh: [c.n, c.g],
            split: c.split,
            splitAxis: c.splitAxis,
            schedule,
            afterCompute,
          });
          expectParses(plan);
          expect(opsPerRank(plan)).toEqual(plan.ranks.map(() => c.n * c.g * c.split));
          // The reference executor: every sum counts each rank once and every read follows its writers.
          const state = runPlan(plan);
          const all = (1 << (c.n * c.g)) - 1;
          const size = c.shape[0]! * c.shape[1]!;
          for (const rp of plan.ranks) {
            const buf = state.get(`${rp.rank}|A`) ?? [];
            for (let e = 0; e < size; e++) {
              if (ownerOf(e, c) === rp.rank) expect(buf[e], `rank ${rp.rank} element ${e}`).toEqual({ mask: all, pos: e });
            }
          }
          // validatePlan: exactly-once writes, no race or deadlock, and the reduce-scatter claim.
          expect(validatePlan(plan)).toEqual({ ok: true });
          // Over the network each rank receives only its own shard's node sums: (N - 1) shards.
          const spans = partition(c.shape[c.axis]!, c.n * c.g);
          const other = c.shape[1 - c.axis]!;
          networkElements(plan, c.g).forEach((got, r) => expect(got).toBe((c.n - 1) * spans[r]!.size * other));
        },
      ),
      RUNS,
    );
  });

  it("rejects a mesh that is not 2-level and an unknown schedule", () => {
    const tensor = { name: "A", shape: [8, 4], dtype: "bf16" as const };
    expect(() => reduceScatterHierarchical({ tensor, axis: 0, mesh: [8] })).toThrow(expect.objectContaining({ code: "invalid-mesh" }));
    expect(() => reduceScatterHierarchical({ tensor, axis: 0, mesh: [2, 4], schedule: "ring" as never })).toThrow(
      expect.objectContaining({ code: "invalid-option" }),
    );
    expect(() => allGatherHierarchical({ tensor, axis: 0, mesh: [2, 4], order: "sideways" as never })).toThrow(
      expect.objectContaining({ code: "invalid-option" }),
    );
  });
});
