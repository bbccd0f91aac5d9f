// Small worked examples of the emitters (also what the tests and the AOT check emit):
// AllGather+GEMM over a push-swizzled and a push-ring AllGather, and GEMM+ReduceScatter
// over a direct ReduceScatter with the copy engine and with SM pushes; each also with NVSHMEM puts,
// and (on an even world of 4 or more: 2 nodes) the hierarchical AllGather+GEMM and GEMM+RS with NVSHMEM puts.
import {
  allGatherHierarchical,
  allGatherRing,
  allGatherSwizzle,
  lowerToTileSchedule,
  planSignals,
  reduceScatterHierarchical,
} from "@ovl/chunk-plan";
import { rsPlan } from "./rs-plan.js";
import { emitAgGemm } from "../operators/ag-gemm/template.js";
import type { EmitResult } from "../core/result.js";
import { emitGemmRs } from "../operators/gemm-rs/template.js";

/** Problem sizes of the examples (small, so their tables stay readable). */
export interface ExampleShape {
  readonly world: number;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly split: number;
  /** GEMM tile (default 128 × 128 × 64). */
  readonly tile?: { readonly BM: number; readonly BN: number; readonly BK: number };
}

const DEFAULT: ExampleShape = { world: 2, M: 512, N: 256, K: 128, split: 2 };

/** The example manifests by name, for `shape` (default: 2 ranks, M=512, N=256, K=128, split 2). */
export function examples(shape: ExampleShape = DEFAULT): Record<string, EmitResult> {
  const { world, M, N, K, split } = shape;
  const tile = shape.tile ?? { BM: 128, BN: 128, BK: 64 };
  const tiling = (tensor: string) => ({ tensor, problem: { M, N, K }, tile, persistent: { numSms: 132 }, groupSizeM: 8 });
  const a = { name: "A", shape: [M, K], dtype: "bf16" as const };
  const swizzle = planSignals(allGatherSwizzle({ tensor: a, axis: 0, mesh: [world], split, side: "push" }));
  const ring = planSignals(allGatherRing({ tensor: a, axis: 0, mesh: [world], split, side: "push" }));
  const rs = rsPlan(world, M, N, split);
  // Two nodes of world / 2 GPUs, the rail's shards across the network first, then relayed inside the node.
  // (Only where every chunk is whole m-blocks: the row-blocked GEMMs need it, and other shapes keep the other examples.)
  const twoNodes = world >= 4 && world % 2 === 0 && M % world === 0 && (M / world / split) % tile.BM === 0;
  const hierarchical = twoNodes
    ? planSignals(
        allGatherHierarchical({ tensor: a, axis: 0, mesh: [2, world / 2], split, order: "inter-node-first", schedule: "pipelined" }),
      )
    : undefined;
  const rsHierarchical = twoNodes
    ? planSignals(
        reduceScatterHierarchical({
          tensor: { name: "C", shape: [M, N], dtype: "bf16" },
          src: "C_partial",
          axis: 0,
          mesh: [2, world / 2],
          split,
          afterCompute: true,
          schedule: "pipelined",
        }),
      )
    : undefined;
  const rsSchedule = lowerToTileSchedule(rs, tiling("C_partial"), { role: "producer" });
  return {
    ag_gemm_swizzle: emitAgGemm(swizzle, lowerToTileSchedule(swizzle, tiling("A"), { role: "consumer" }), { name: "ag_gemm_swizzle" }),
    ag_gemm_ring: emitAgGemm(ring, lowerToTileSchedule(ring, tiling("A"), { role: "consumer" }), { name: "ag_gemm_ring" }),
    gemm_rs_ce: emitGemmRs(rs, rsSchedule, { name: "gemm_rs_ce", backend: "copy-engine" }),
    gemm_rs_sm: emitGemmRs(rs, rsSchedule, { name: "gemm_rs_sm", backend: "sm" }),
    // The nvshmem transfer backend: the same plans, each chunk one NVSHMEM put with signal.
    ag_gemm_swizzle_nvshmem: emitAgGemm(swizzle, lowerToTileSchedule(swizzle, tiling("A"), { role: "consumer" }), {
      name: "ag_gemm_swizzle_nvshmem",
      backend: "nvshmem",
    }),
    ag_gemm_ring_nvshmem: emitAgGemm(ring, lowerToTileSchedule(ring, tiling("A"), { role: "consumer" }), {
      name: "ag_gemm_ring_nvshmem",
      backend: "nvshmem",
    }),
    gemm_rs_nvshmem: emitGemmRs(rs, rsSchedule, { name: "gemm_rs_nvshmem", backend: "nvshmem" }),
    ...(hierarchical === undefined
      ? {}
      : {
          ag_gemm_hierarchical_nvshmem: emitAgGemm(hierarchical, lowerToTileSchedule(hierarchical, tiling("A"), { role: "consumer" }), {
            name: "ag_gemm_hierarchical_nvshmem",
            backend: "nvshmem",
          }),
        }),
    ...(rsHierarchical === undefined
      ? {}
      : {
          gemm_rs_hierarchical_nvshmem: emitGemmRs(
            rsHierarchical,
            lowerToTileSchedule(rsHierarchical, tiling("C_partial"), { role: "producer" }),
            { name: "gemm_rs_hierarchical_nvshmem", backend: "nvshmem" },
          ),
        }),
  };
}
