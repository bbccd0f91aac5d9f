// Sequence-parallel attention (TileLink's AG + attention): the K/V of every rank gathered
// by a push-swizzled AllGather while a flash-attention body consumes kv chunks as they land.
import { allGatherSwizzle, planSignals } from "@ovl/chunk-plan";
import type { CommBackend } from "../simulate/comm.js";
import type { HardwareModel } from "../simulate/hardware.js";
import { resolveHardware } from "../simulate/registry.js";
import { SimulateError } from "../simulate/errors.js";
import { ATTENTION_BODY } from "./calibration.js";
import { chunkPipeline, type OperatorPrediction, operatorPrediction, slabArrivals } from "./prediction.js";

/** An attention problem: full sequence `seq` (queries and kv split over `world` ranks), bf16. */
export interface AttentionProblem {
  readonly seq: number;
  readonly heads: number;
  /** K/V heads (default `heads`, MHA). */
  readonly kvHeads?: number;
  readonly headDim: number;
  readonly causal: boolean;
  readonly world: number;
}

/**
 * Flops of the body over one kv slab `q` on rank `r`: `4 · (S/W)² · D · heads` times the
 * visible fraction (causal: slabs before the rank's own in full, its own half, later none).
 */
export function attentionSlabFlops(p: AttentionProblem, rank: number, slab: number): number {
  const rows = p.seq / p.world;
  const full = 4 * rows * rows * p.headDim * p.heads;
  if (!p.causal || slab < rank) return full;
  return slab === rank ? full / 2 : 0;
}

/** The body alone on rank `rank`: launch plus every slab's flops at the calibrated efficiency (ms). */
export function attentionComputeMs(hw: HardwareModel, p: AttentionProblem, rank: number): number {
  let ms = ATTENTION_BODY.launchUs * 1e-3;
  for (let q = 0; q < p.world; q++) ms += slabMs(hw, p, rank, q);
  return ms;
}

function slabMs(hw: HardwareModel, p: AttentionProblem, rank: number, slab: number): number {
  const eff = p.causal ? ATTENTION_BODY.causalEfficiency : ATTENTION_BODY.efficiency;
  return (attentionSlabFlops(p, rank, slab) / (eff * hw.gemm.tflopsPerSm * hw.smCount * 1e12)) * 1e3;
}

/**
 * Predict AG + attention: per rank, the body visits kv slabs in arrival order (its own
 * first), each after it lands; the operator ends on the slowest rank, when its body and its
 * copies are done. Compute and communication alone are the maxima over ranks.
 */
export function predictAgAttention(
  problem: AttentionProblem,
  options: { readonly hardware: HardwareModel | string; readonly backend?: CommBackend },
): OperatorPrediction {
  const hw = resolveHardware(options.hardware);
  checkAttention(problem);
  const { seq, world, headDim } = problem;
  const kvHeads = problem.kvHeads ?? problem.heads;
  const plan = planSignals(
    allGatherSwizzle({
      tensor: { name: "kv", shape: [seq, 2 * kvHeads * headDim], dtype: "bf16" },
      axis: 0,
      mesh: [world],
      split: 1,
      side: "push",
    }),
  );
  const backend = options.backend ?? "copy-engine";
  const alone = slabArrivals(plan, "kv", hw, backend, false);
  const beside = slabArrivals(plan, "kv", hw, backend, true);
  let overlapped = 0;
  let compute = 0;
  for (let r = 0; r < world; r++) {
    const order = [...beside.arrival[r]!.keys()].sort((a, b) => beside.arrival[r]![a]! - beside.arrival[r]![b]!);
    const chunks = order.map((q) => ({ readyMs: beside.arrival[r]![q]!, ms: slabMs(hw, problem, r, q) }));
    const end = chunkPipeline(ATTENTION_BODY.launchUs * 1e-3, chunks, hw.contention.copySlowdown, beside.commEnd[r]!);
    overlapped = Math.max(overlapped, end, beside.commEnd[r]!);
    compute = Math.max(compute, attentionComputeMs(hw, problem, r));
  }
  return operatorPrediction(
    problem.causal ? "ag-attention-causal" : "ag-attention",
    hw.name,
    world,
    overlapped,
    compute,
    Math.max(...alone.commEnd),
  );
}

function checkAttention(p: AttentionProblem): void {
  const ints = { seq: p.seq, heads: p.heads, headDim: p.headDim, world: p.world, kvHeads: p.kvHeads ?? p.heads };
  for (const [k, v] of Object.entries(ints)) {
    if (!Number.isInteger(v) || v <= 0) throw new SimulateError("bad-problem", `attention ${k} = ${v}: give a positive integer`);
  }
  if (p.seq % p.world !== 0) {
    throw new SimulateError("bad-problem", `attention seq ${p.seq} is not a multiple of world ${p.world}: each rank holds S/W positions`);
  }
}
