// AllGather+GEMM over M rows that the world does not divide: the plan cuts the balanced
// partition (the first M mod world ranks one row more), and the manifest's reference states
// those shards as `rowCounts`, which the runner's references read. The property compiles
// random such shapes and checks the reference against the plan and against the copies.
import { allGatherRing, allGatherSwizzle, planSignals, type ChunkPlan } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Manifest } from "../../core/manifest/schema.js";
import { builtinBody, compile } from "../../index.js";

const K = 32;

function agPlan(world: number, M: number, split: number, ring: boolean): ChunkPlan {
  const o = { tensor: { name: "A", shape: [M, K], dtype: "fp32" as const }, axis: 0, mesh: [world], split, side: "push" as const };
  return planSignals(ring ? allGatherRing(o) : allGatherSwizzle(o));
}

/** Rows `[first, end)` of every rank's shard, from the reference's counts (rank order). */
function shardRows(counts: readonly number[]): [number, number][] {
  let at = 0;
  return counts.map((c) => {
    const rows: [number, number] = [at, at + c];
    at += c;
    return rows;
  });
}

const uneven = fc
  .record({
    world: fc.constantFrom(2, 3, 6, 12),
    rows: fc.integer({ min: 2, max: 40 }),
    split: fc.integer({ min: 1, max: 2 }),
    ring: fc.boolean(),
  })
  .chain((c) => fc.integer({ min: 1, max: c.world - 1 }).map((extra) => ({ ...c, M: c.world * c.rows + extra })));

describe("AllGather+GEMM with uneven row shards", () => {
  it("states each rank's rows as the plan cuts them, and every copy moves rows of one shard (property)", async () => {
    await fc.assert(
      fc.asyncProperty(uneven, async ({ world, M, split, ring }) => {
        const plan = agPlan(world, M, split, ring);
        const op = {
          name: "ag_gemm_uneven",
          kind: "ag-gemm" as const,
          plan,
          body: builtinBody("gemm_tma_persistent"),
          problem: { M, N: 32, K },
          tile: { BM: 32, BN: 32, BK: 32 },
          groupM: 2,
          options: { dtype: "fp32" as const },
        };
        const { manifest } = await compile(op);
        expect(() => Manifest.parse(manifest)).not.toThrow();
        const ref = manifest.reference;
        expect(ref.rowsPerRank).toBeUndefined();
        const counts = ref.rowCounts ?? [];
        expect(counts).toHaveLength(world);
        expect(counts.reduce((a, b) => a + b, 0)).toBe(M);
        expect(Math.max(...counts) - Math.min(...counts)).toBe(1);
        // The reference's shard of rank r is the region the plan says rank r holds at start.
        const rows = shardRows(counts);
        for (const rp of plan.ranks) {
          const local = rp.local[0]!;
          expect([local.offsets[0], local.offsets[0]! + local.sizes[0]!]).toEqual(rows[rp.rank]);
        }
        // Every copy of A moves whole rows of one shard, and each rank ends up receiving
        // every row but its own shard's.
        const received = Array.from({ length: world }, () => new Array<number>(M).fill(0));
        for (const h of manifest.hostOps) {
          for (const s of h.streams) {
            for (const o of s.ops) {
              if (o.kind !== "copy" || o.src.buffer !== "A") continue;
              expect(o.src.offset % K).toBe(0);
              expect(o.src.length % K).toBe(0);
              const [lo, hi] = [o.src.offset / K, (o.src.offset + o.src.length) / K];
              expect(rows.some(([first, end]) => first <= lo && hi <= end)).toBe(true);
              for (let row = lo; row < hi; row++) received[o.dst.rank]![row]! += 1;
            }
          }
        }
        for (let r = 0; r < world; r++) {
          const [first, end] = rows[r]!;
          expect(received[r]!.map((n, row) => (row >= first && row < end ? n === 0 : n === 1)).every(Boolean)).toBe(true);
        }
      }),
      { numRuns: 30 },
    );
  });
});
