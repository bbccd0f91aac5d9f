// The compute kernel's tiling (AutoOverlap §5.2 annotations: tile size, tile index, tile
// scheduler) and the geometry it implies: tile counts, tile ids, and the tensor region
// each tile reads (consumer) or writes (producer).
import { z } from "zod";
import type { ChunkPlan, Region, TensorDecl } from "../model/schema.js";
import { TileScheduleError } from "./errors.js";

const Positive = z.number().int().positive();

/**
 * How a GEMM-like kernel tiles its problem. `tensor` is the plan tensor the kernel reads
 * (consumer: e.g. the gathered A, rows = M) or writes (producer: e.g. the output C,
 * `[M, N]`). Output tiles are `BM × BN`; `BK` is the K step (it does not affect
 * dependencies, as a tile reads all of K). `persistent` kernels launch `numSms` programs
 * that stride over the visit order; otherwise one program per tile. `groupSizeM` is the
 * L2 grouping of the intra-chunk swizzle (1 = row-major).
 */
export const ComputeTiling = z.object({
  tensor: z.string().min(1),
  problem: z.object({ M: Positive, N: Positive, K: Positive }),
  tile: z.object({ BM: Positive, BN: Positive, BK: Positive }),
  persistent: z.object({ numSms: Positive }).nullable().default(null),
  groupSizeM: Positive.default(1),
});
export type ComputeTiling = z.infer<typeof ComputeTiling>;
/** A tiling as callers write it: `persistent` and `groupSizeM` may be left out. */
export type ComputeTilingInput = z.input<typeof ComputeTiling>;

/** Whether the kernel reads the plan's tensor (waits on chunks) or writes it (notifies). */
export type TileRole = "consumer" | "producer";

/** The tile grid of a tiling: `numPidM × numPidN` tiles, tile id = `pidM * numPidN + pidN`. */
export interface TileGrid {
  readonly numPidM: number;
  readonly numPidN: number;
  readonly numTiles: number;
}

/** Parse and check a tiling against the plan tensor it names. */
export function resolveTiling(
  plan: ChunkPlan,
  input: ComputeTilingInput,
  role: TileRole,
): {
  tiling: ComputeTiling;
  tensor: TensorDecl;
  grid: TileGrid;
} {
  const parsed = ComputeTiling.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new TileScheduleError(
      "bad-tiling",
      `tiling.${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"} (M, N, K, BM, BN, BK, numSms and groupSizeM are positive integers)`,
    );
  }
  const tiling = parsed.data;
  const tensor = plan.tensors.find((t) => t.name === tiling.tensor);
  if (tensor === undefined) {
    throw new TileScheduleError(
      "unknown-tensor",
      `tiling.tensor "${tiling.tensor}" is not a tensor of plan "${plan.name}" (${plan.tensors.map((t) => t.name).join(", ")})`,
    );
  }
  const { M, N } = tiling.problem;
  const ok = role === "consumer" ? tensor.shape[0] === M : tensor.shape[0] === M && tensor.shape[1] === N;
  if (!ok) {
    throw new TileScheduleError(
      "shape-mismatch",
      role === "consumer"
        ? `a consumer reads rows of ${tensor.name}: its shape [${tensor.shape.join(",")}] must start with M = ${M}`
        : `a producer writes ${tensor.name} as [M, N, ...]: its shape [${tensor.shape.join(",")}] must start with ${M}, ${N}`,
    );
  }
  const numPidM = Math.ceil(M / tiling.tile.BM);
  const numPidN = Math.ceil(N / tiling.tile.BN);
  return { tiling, tensor, grid: { numPidM, numPidN, numTiles: numPidM * numPidN } };
}

/**
 * The region of `tensor` tile `(pidM, pidN)` depends on: a consumer reads rows
 * `[pidM·BM, min((pidM+1)·BM, M))` and every other axis whole; a producer writes those
 * rows × columns `[pidN·BN, min((pidN+1)·BN, N))`, and every further axis whole. Edge
 * tiles are clipped (ragged M or N).
 */
export function tileRegion(tiling: ComputeTiling, tensor: TensorDecl, role: TileRole, pidM: number, pidN: number): Region {
  const { M, N } = tiling.problem;
  const { BM, BN } = tiling.tile;
  const offsets = tensor.shape.map(() => 0);
  const sizes = [...tensor.shape];
  offsets[0] = pidM * BM;
  sizes[0] = Math.min(BM, M - pidM * BM);
  if (role === "producer") {
    offsets[1] = pidN * BN;
    sizes[1] = Math.min(BN, N - pidN * BN);
  }
  return { tensor: tensor.name, offsets, sizes };
}

/** Inclusive ranges of tile rows and columns. */
export interface TileSpan {
  readonly m0: number;
  readonly m1: number;
  readonly n0: number;
  readonly n1: number;
}

/**
 * The tiles whose {@link tileRegion} meets `region` (a region of the tiled tensor), by
 * index arithmetic: tiles sit on the `BM × BN` grid and span every further axis whole,
 * so a tile meets the region exactly when their row (and, for a producer, column)
 * ranges overlap. Empty ranges (`m0 > m1`) when the region lies outside the problem.
 */
export function tileSpan(region: Region, tiling: ComputeTiling, role: TileRole, grid: TileGrid): TileSpan {
  const range = (lo: number, size: number, block: number, count: number): [number, number] => [
    Math.floor(lo / block),
    Math.min(count - 1, Math.floor((lo + size - 1) / block)),
  ];
  const [m0, m1] = range(region.offsets[0] ?? 0, region.sizes[0] ?? 0, tiling.tile.BM, grid.numPidM);
  if (role === "consumer") return { m0, m1, n0: 0, n1: grid.numPidN - 1 };
  const [n0, n1] = range(region.offsets[1] ?? 0, region.sizes[1] ?? 0, tiling.tile.BN, grid.numPidN);
  return { m0, m1, n0, n1 };
}
