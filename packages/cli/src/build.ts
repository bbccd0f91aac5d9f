// From a checked Problem to the pipeline's data: the chunk plan (a template, with its
// signal slots), the compute kernel's tiling, and the tile schedule lowered against it.
import {
  allGatherHierarchical,
  allGatherRing,
  allGatherSwizzle,
  allReducePartitioned,
  allReduceTilewise,
  allToAll,
  collectiveDirect,
  lowerToTileSchedule,
  planSignals,
  reduceScatterDirect,
  reduceScatterHierarchical,
  reduceScatterRing,
  type ChunkPlan,
  type ComputeTilingInput,
  type TileSchedule,
} from "@ovl/chunk-plan";
import { UsageError } from "./errors.js";
import type { Problem } from "./problem.js";

/** The tensor the operator's collective moves and, for reductions, where partials live. */
function moved(p: Problem): { name: string; shape: number[] } {
  // AG+GEMM gathers the rows of A [M×K]; GEMM+RS reduce-scatters (GEMM+AR all-reduces) C [M×N] from C_partial.
  return p.operator === "ag-gemm" || p.operator === "all-gather" || p.operator === "a2a-gemm"
    ? { name: "A", shape: [p.M, p.K] }
    : { name: "C", shape: [p.M, p.N] };
}

/** The plan of `p` from its template, without signals. */
export function templatePlan(p: Problem): ChunkPlan {
  const { name, shape } = moved(p);
  const tensor = { name, shape, dtype: p.dtype };
  const base = { tensor, axis: 0, mesh: [...p.mesh], split: p.split };
  switch (p.operator) {
    case "ag-gemm":
    case "all-gather":
      if (p.template === "ring") return allGatherRing({ ...base, side: p.side });
      // Over NVSHMEM the rail's shards cross the network first and are relayed over NVLink: each
      // relay forwards one chunk that arrived, which a put with one wait can (a node block of the
      // intra-node-first order is several arrivals).
      if (p.template === "hierarchical")
        return allGatherHierarchical({
          ...base,
          schedule: "pipelined",
          ...(p.backend === "nvshmem" ? { order: "inter-node-first" as const } : {}),
        });
      if (p.template === "direct") return collectiveDirect({ tensor, axis: 0, mesh: [...p.mesh], collective: "all-gather" });
      return allGatherSwizzle({ ...base, side: p.side });
    case "gemm-rs":
    case "reduce-scatter": {
      const o = { ...base, src: `${name}_partial`, afterCompute: p.operator === "gemm-rs" };
      if (p.template === "hierarchical") return reduceScatterHierarchical({ ...o, schedule: "pipelined" });
      return p.template === "ring" ? reduceScatterRing(o) : reduceScatterDirect(o);
    }
    case "gemm-ar": {
      const o = { ...base, src: `${name}_partial`, afterCompute: true };
      // The tile-wise AllReduce's tiles are the fused GEMM's; its split is the GEMM's tiling.
      if (p.template === "tilewise") return allReduceTilewise({ ...o, tile: [p.tile.BM, p.tile.BN] });
      return allReducePartitioned({ ...o, reduceScatter: "direct", allGather: "swizzle" });
    }
    case "all-reduce":
      return p.template === "direct"
        ? allReducePartitioned({ ...base, reduceScatter: "direct", allGather: "swizzle" })
        : allReducePartitioned({ ...base, reduceScatter: "ring", allGather: "ring-push" });
    case "all-to-all":
    case "a2a-gemm":
      // AllToAll+GEMM: slab j of every rank's A_send lands in rank j's A, which the GEMM reads.
      return allToAll(base);
  }
}

/** The plan of `p` with its signal slots allocated (monotone epochs). */
export function buildPlan(p: Problem): ChunkPlan {
  return planSignals(templatePlan(p));
}

/** Whether the fused GEMM consumes what the plan moves (AG+GEMM, A2A+GEMM) rather than producing it. */
export function consumes(p: Problem): boolean {
  return p.operator === "ag-gemm" || p.operator === "a2a-gemm";
}

/** The fused GEMM's tiling: the consumer of the gathered A, or the producer of C_partial. */
export function gemmTiling(p: Problem): ComputeTilingInput {
  if (p.operator !== "ag-gemm" && p.operator !== "gemm-rs" && p.operator !== "gemm-ar" && p.operator !== "a2a-gemm") {
    throw new UsageError("unsupported", `${p.operator} has no fused GEMM to schedule; use ag-gemm, gemm-rs, gemm-ar or a2a-gemm`);
  }
  return {
    tensor: p.operator === "ag-gemm" || p.operator === "a2a-gemm" ? "A" : "C_partial",
    problem: { M: p.M, N: p.N, K: p.K },
    tile: { ...p.tile },
    groupSizeM: p.groupSizeM,
    persistent: { numSms: p.numSms },
  };
}

/** The tile schedule of the fused GEMM of `p` against `plan`. */
export function buildSchedule(p: Problem, plan: ChunkPlan): TileSchedule {
  return lowerToTileSchedule(plan, gemmTiling(p), { role: consumes(p) ? "consumer" : "producer" });
}
