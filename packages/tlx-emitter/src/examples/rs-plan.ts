import { planSignals, reduceScatterDirect, reduceScatterRing, type ChunkPlan } from "@ovl/chunk-plan";

// The plan of the GEMM+ReduceScatter examples and tests: one definition for every example set
// (Triton, compile(), TLX) and the tests that compile against it.

/** The ReduceScatter of a GEMM's partial product `C_partial` into `C` ([M, N] bf16) by rows, after compute: direct, or a ring. */
export function rsPlan(world: number, M: number, N: number, split: number, ring = false): ChunkPlan {
  const o = {
    tensor: { name: "C", shape: [M, N], dtype: "bf16" as const },
    src: "C_partial",
    axis: 0,
    mesh: [world],
    split,
    afterCompute: true,
  };
  return planSignals(ring ? reduceScatterRing(o) : reduceScatterDirect(o));
}
