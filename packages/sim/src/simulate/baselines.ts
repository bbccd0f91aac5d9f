// Predictions for the non-overlapped path (a GEMM, then or after an NCCL-like collective),
// the baseline an overlapped operator must beat and the path to choose when it would lose.
import { type CollectiveKind, type DType, DTYPE_BYTES } from "@ovl/chunk-plan";
import type { HardwareModel } from "./hardware.js";
import { resolveHardware } from "./registry.js";
import { type GemmProblem, gemmMs } from "./cost.js";
import { fabricCollective, type FabricCollective } from "./collective-fabric.js";
import { modelGpus } from "./network.js";
import { SimulateError } from "./errors.js";

/** Inputs of {@link predictBaselines}. */
export interface BaselineInput {
  readonly hardware: HardwareModel | string;
  /** The per-rank GEMM (e.g. AG+GEMM: M = gathered rows, N = I/W, K = H). */
  readonly problem: GemmProblem;
  /** The collective on the path: kind, the tensor's full shape (gathered output / reduce-scatter input) and dtype. */
  readonly collective: { readonly kind: CollectiveKind; readonly shape: readonly number[]; readonly dtype: DType };
  readonly world: number;
  /** The GEMM kernel's speed relative to cuBLAS (default 1). */
  readonly efficiency?: number;
}

/** Predicted baseline times (ms). */
export interface BaselinePrediction {
  readonly gemmMs: number;
  readonly collectiveMs: number;
  /** GEMM and collective one after the other. */
  readonly notOverlappedMs: number;
  /** `max(gemmMs, collectiveMs)`: what a perfectly overlapped operator at these speeds takes. */
  readonly boundMs: number;
  /** Multi-node models only: the collective's algorithm on the two-level fabric (`fabricCollective`). */
  readonly collectiveAlgorithm?: FabricCollective["algorithm"];
}

/** Predict the non-overlapped path: GEMM alone, the collective alone, their sum and the bound. */
export function predictBaselines(input: BaselineInput): BaselinePrediction {
  const hw = resolveHardware(input.hardware);
  if (!Number.isInteger(input.world) || input.world < 1) {
    throw new SimulateError("bad-problem", `world = ${input.world}: give the number of ranks, a positive integer`);
  }
  const elements = input.collective.shape.reduce((a, b) => a * b, 1);
  if (!(elements > 0) || input.collective.shape.some((d) => !Number.isInteger(d) || d <= 0)) {
    throw new SimulateError("bad-problem", `collective.shape [${input.collective.shape.join(", ")}]: give positive integer extents`);
  }
  const g = gemmMs(hw, input.problem, input.efficiency === undefined ? {} : { efficiency: input.efficiency });
  if (input.world > modelGpus(hw)) {
    throw new SimulateError("bad-problem", `world = ${input.world}: hardware model ${hw.name} has ${modelGpus(hw)} GPUs`);
  }
  // On a multi-node model the collective runs on the two-level fabric (one node: the measured fit).
  const ranks = Array.from({ length: input.world }, (_, r) => r);
  const fabric = fabricCollective(hw, input.collective.kind, elements * DTYPE_BYTES[input.collective.dtype], ranks);
  const c = fabric.ms;
  return {
    gemmMs: g,
    collectiveMs: c,
    notOverlappedMs: g + c,
    boundMs: Math.max(g, c),
    ...(hw.topology === undefined ? {} : { collectiveAlgorithm: fabric.algorithm }),
  };
}
