// From a candidate to what a cost model prices: the operator's chunk plan (push-swizzled
// AllGather of A, or direct ReduceScatter of C after compute) cut at the candidate's
// split, with signals, and the fused GEMM's tile schedule at its tile and swizzle.
import {
  allGatherHierarchical,
  allGatherSwizzle,
  allReducePartitioned,
  type ChunkPlan,
  lowerToTileSchedule,
  planSignals,
  reduceScatterDirect,
  reduceScatterHierarchical,
  type TileSchedule,
} from "@ovl/chunk-plan";
import { TuneError } from "./errors.js";
import type { OverlappedCandidate, TunePlan, TuneProblem } from "./space.js";

/** A candidate's plan and tile schedule. */
export interface BuiltCandidate {
  readonly plan: ChunkPlan;
  readonly schedule: TileSchedule;
}

/**
 * The operator's signalled chunk plan at `split`: a push-swizzled AllGather of A, a direct
 * ReduceScatter of C after compute, or (gemm-ar) the partitioned AllReduce of C (direct
 * ReduceScatter after compute, then a swizzled AllGather), which the tile-wise candidates
 * are priced on too (`./all-reduce.ts`).
 */
export function candidatePlan(problem: TuneProblem, split: number, plan: TunePlan = "flat"): ChunkPlan {
  if (plan !== "flat") return hierarchicalPlan(problem, split, plan);
  const { M, N, K, world, dtype } = problem;
  const mesh = [world];
  if (problem.operator === "ag-gemm") {
    return planSignals(allGatherSwizzle({ tensor: { name: "A", shape: [M, K], dtype }, axis: 0, mesh, split, side: "push" }));
  }
  const C = { tensor: { name: "C", shape: [M, N], dtype }, src: "C_partial", axis: 0, mesh, split, afterCompute: true } as const;
  if (problem.operator === "gemm-ar") return planSignals(allReducePartitioned({ ...C, reduceScatter: "direct", allGather: "swizzle" }));
  return planSignals(reduceScatterDirect(C));
}

/**
 * A two-level candidate plan on mesh `[world / gpusPerNode, gpusPerNode]`: AllGather+GEMM's
 * hierarchical AllGather of A (either stage order), or GEMM+ReduceScatter's hierarchical
 * ReduceScatter of C after compute (intra-node first only). Throws {@link TuneError}
 * `bad-problem` for a problem without nodes, an order the operator has no template for, or
 * GEMM+AllReduce (no two-level form yet).
 */
function hierarchicalPlan(problem: TuneProblem, split: number, plan: Exclude<TunePlan, "flat">): ChunkPlan {
  const { M, N, K, world, dtype, gpusPerNode: G } = problem;
  if (G === undefined || world % G !== 0 || world === G) {
    throw new TuneError("bad-problem", `plan ${plan} needs ranks on several nodes: world ${world} over gpusPerNode ${G ?? "(none)"}`);
  }
  const mesh = [world / G, G];
  const [order, schedule] = plan.split("/") as ["intra-node-first" | "inter-node-first", "staged" | "pipelined"];
  if (problem.operator === "ag-gemm") {
    return planSignals(allGatherHierarchical({ tensor: { name: "A", shape: [M, K], dtype }, axis: 0, mesh, split, schedule, order }));
  }
  if (problem.operator === "gemm-ar" || order !== "intra-node-first") {
    throw new TuneError(
      "bad-problem",
      `${problem.operator} has no ${order} two-level plan (GEMM+ReduceScatter reduces inside the node first)`,
    );
  }
  return planSignals(
    reduceScatterHierarchical({
      tensor: { name: "C", shape: [M, N], dtype },
      src: "C_partial",
      axis: 0,
      mesh,
      split,
      schedule,
      afterCompute: true,
    }),
  );
}

/** The fused GEMM's schedule against `plan` at the candidate's tile, swizzle and SM count. */
export function candidateSchedule(problem: TuneProblem, plan: ChunkPlan, c: OverlappedCandidate, numSms: number): TileSchedule {
  const consumer = problem.operator === "ag-gemm";
  return lowerToTileSchedule(
    plan,
    {
      tensor: consumer ? "A" : "C_partial",
      problem: { M: problem.M, N: problem.N, K: problem.K },
      tile: { ...c.tile },
      groupSizeM: c.groupSizeM,
      persistent: { numSms },
    },
    { role: consumer ? "consumer" : "producer" },
  );
}

/**
 * Why the emitted kernels could not realise `c`, or `undefined`: each chunk must cover
 * whole tile rows (`M / world / split` a multiple of `BM`), so that a tile waits on (or
 * notifies) exactly one chunk.
 */
export function chunkMisfit(problem: TuneProblem, c: OverlappedCandidate): string | undefined {
  const rows = problem.M / problem.world;
  const chunk = rows / c.split;
  if (!Number.isInteger(rows) || !Number.isInteger(chunk) || chunk % c.tile.BM !== 0) {
    return `chunks of ${Number.isInteger(chunk) ? chunk : chunk.toFixed(1)} rows do not cover whole ${c.tile.BM}-row tiles (M / world / split must be a multiple of BM)`;
  }
  return undefined;
}
