import { type ChunkPlan, allGatherHierarchical, lowerToTileSchedule, planSignals, validatePlan } from "@ovl/chunk-plan";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { emitAgGemm } from "../../../index.js";
import { codeOf } from "../../../testing/errors.js";
import { completes, nvshmemRows, rowsAsPlan, signalled, waited } from "../../../testing/nvshmem-rows.js";

// Hierarchical (two-level) AllGather+GEMM on the nvshmem backend: the plan's pulls are the
// holders' puts with signal, a relay waits on the slot of the chunk it forwards, and the rows,
// read back as a plan of one put per stream, validate as the AllGather the plan claims.

const TILE = { BM: 16, BN: 64, BK: 32 };
const K = 64;

function hierarchical(
  nodes: number,
  gpus: number,
  split: number,
  order: "inter-node-first" | "intra-node-first",
  staged: boolean,
): ChunkPlan {
  const M = TILE.BM * nodes * gpus * split * 2;
  return planSignals(
    allGatherHierarchical({
      tensor: { name: "A", shape: [M, K], dtype: "bf16" },
      axis: 0,
      mesh: [nodes, gpus],
      split,
      order,
      schedule: staged ? "staged" : "pipelined",
    }),
  );
}

function emit(plan: ChunkPlan) {
  const M = plan.tensors[0]!.shape[0]!;
  const schedule = lowerToTileSchedule(
    plan,
    { tensor: "A", problem: { M, N: 64, K }, tile: TILE, persistent: { numSms: 8 }, groupSizeM: 2 },
    { role: "consumer" },
  );
  return emitAgGemm(plan, schedule, { backend: "nvshmem" }).manifest;
}

const mesh = { nodes: fc.integer({ min: 2, max: 3 }), gpus: fc.integer({ min: 1, max: 4 }), split: fc.integer({ min: 1, max: 3 }) };

describe("hierarchical AllGather+GEMM on the nvshmem backend", () => {
  it("emits the inter-node-first plan for any nodes, GPUs per node, split and schedule, and its rows are the AllGather", () => {
    fc.assert(
      fc.property(mesh.nodes, mesh.gpus, mesh.split, fc.boolean(), (nodes, gpus, split, staged) => {
        const plan = hierarchical(nodes, gpus, split, "inter-node-first", staged);
        const m = emit(plan);
        // Every chunk slot the consumer waits on is signalled once per launch, and nothing else is.
        expect(signalled(m)).toEqual(waited(m, "mblock_wait_slot"));
        for (const programs of [1, 2, 3]) expect(completes(m, programs)).toBe(true);
        // The rows as a plan (each put on a stream of its own, ordered only by its wait) gather A.
        expect(validatePlan(rowsAsPlan(m, plan))).toEqual({ ok: true });
        // Only the network stage crosses nodes, on the rail: each rank puts its own shard to the
        // same GPU index of every other node, (nodes - 1) · split puts.
        const shardElems = (plan.tensors[0]!.shape[0]! / (nodes * gpus)) * K;
        nvshmemRows(m).forEach((rs, rank) => {
          const network = rs.filter((r) => r.notify_at >= 0 && Math.floor(r.dst_rank / gpus) !== Math.floor(rank / gpus));
          expect(network.length).toBe((nodes - 1) * split);
          for (const r of network) {
            expect(r.dst_rank % gpus).toBe(rank % gpus);
            expect(Math.floor(r.src_offset / shardElems)).toBe(rank);
            expect(r.wait_at).toBe(-1);
          }
        });
      }),
      { numRuns: 30 },
    );
  });

  it("emits an intra-node-first plan only where each put reads one arrival, and every plan it emits validates", () => {
    fc.assert(
      fc.property(mesh.nodes, mesh.gpus, mesh.split, fc.boolean(), (nodes, gpus, split, staged) => {
        const plan = hierarchical(nodes, gpus, split, "intra-node-first", staged);
        let m: ReturnType<typeof emit>;
        try {
          m = emit(plan);
        } catch (e) {
          // A node block assembled from several arrivals cannot be forwarded by a put waiting on one.
          expect(codeOf(() => emit(plan))).toBe("unsupported-dependency");
          expect(String(e)).toMatch(/an nvshmem put waits on one slot .* allGatherHierarchical\(\{ order: 'inter-node-first' \}\)/);
          return;
        }
        expect(validatePlan(rowsAsPlan(m, plan))).toEqual({ ok: true });
        for (const programs of [1, 2]) expect(completes(m, programs)).toBe(true);
      }),
      { numRuns: 30 },
    );
    // Two GPUs, one chunk: a node block is the holder's shard and one arrival, which the put waits on.
    expect(
      validatePlan(rowsAsPlan(emit(hierarchical(2, 2, 1, "intra-node-first", true)), hierarchical(2, 2, 1, "intra-node-first", true))),
    ).toEqual({
      ok: true,
    });
    // Four GPUs: a node block is three arrivals and the holder's shard.
    expect(codeOf(() => emit(hierarchical(2, 4, 1, "intra-node-first", false)))).toBe("unsupported-dependency");
  });

  it("a relay that did not wait for its chunk is caught by the validator (the check can fail)", () => {
    const plan = hierarchical(2, 2, 1, "inter-node-first", false);
    const m = emit(plan);
    const table = m.tables.find((t) => t.name === "push_segments")!;
    // Rank 0's first row that waits (a relay of a chunk from the other node): drop its wait.
    const flat = table.values[0]!;
    const at = flat.findIndex((_, i) => i % 7 === 4 && flat[i]! >= 0);
    expect(at).toBeGreaterThan(0);
    flat[at] = -1;
    const v = validatePlan(rowsAsPlan(m, plan));
    expect(v.ok).toBe(false);
  });
});
