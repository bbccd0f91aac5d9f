// What every operator model answers, and the pieces they share: when each rank's slabs of
// a gathered (or all-to-all) tensor land, from the existing communication simulation, and
// the classification of the resource that bounds an overlapped operator.
import type { ChunkPlan } from "@ovl/chunk-plan";
import { type CommBackend, simulateComm } from "../simulate/comm.js";
import type { HardwareModel } from "../simulate/hardware.js";
import { SimulateError } from "../simulate/errors.js";

/** The resource an operator's time is bounded by: the larger of its compute alone and its communication alone. */
export type BoundResource = "compute" | "communication";

/** A prediction of one overlapped operator at one world size on one hardware model (ms; slowest rank). */
export interface OperatorPrediction {
  readonly operator: string;
  readonly hardware: string;
  readonly world: number;
  /** The overlapped operator. */
  readonly overlappedMs: number;
  /** The compute body alone on all SMs. */
  readonly computeMs: number;
  /** The plan's communication alone. */
  readonly commMs: number;
  /** `computeMs + commMs`: compute and communication one after the other. */
  readonly nonOverlappedMs: number;
  /** `nonOverlappedMs / overlappedMs`. */
  readonly speedup: number;
  readonly bound: BoundResource;
}

/** Assemble a prediction from its parts (checks they are finite and non-negative). */
export function operatorPrediction(
  operator: string,
  hardware: string,
  world: number,
  overlappedMs: number,
  computeMs: number,
  commMs: number,
): OperatorPrediction {
  for (const [k, v] of Object.entries({ overlappedMs, computeMs, commMs })) {
    if (!(Number.isFinite(v) && v >= 0)) throw new SimulateError("bad-problem", `${operator}: ${k} = ${v} is not a time`);
  }
  const nonOverlappedMs = computeMs + commMs;
  return {
    operator,
    hardware,
    world,
    overlappedMs,
    computeMs,
    commMs,
    nonOverlappedMs,
    speedup: nonOverlappedMs / overlappedMs,
    bound: computeMs >= commMs ? "compute" : "communication",
  };
}

/** When each rank's slabs land: `arrival[rank][slab]` (ms), and per rank its last op's end. */
export interface SlabArrivals {
  readonly arrival: readonly (readonly number[])[];
  readonly commEnd: readonly number[];
}

/**
 * Simulate `plan` (a gather or all-to-all along axis 0 of `tensor`, `world` equal slabs) and
 * return when each slab lands on each rank: the latest end of the ops writing into it on
 * that rank (0 for a slab no op writes, i.e. already local). `beside`: a compute kernel runs
 * on every rank during the transfers (copy-engine bandwidth under compute applies).
 */
export function slabArrivals(plan: ChunkPlan, tensor: string, hw: HardwareModel, backend: CommBackend, beside: boolean): SlabArrivals {
  const world = plan.ranks.length;
  const decl = plan.tensors.find((t) => t.name === tensor);
  if (decl === undefined) throw new SimulateError("schedule-mismatch", `plan "${plan.name}" has no tensor "${tensor}"`);
  const slabRows = decl.shape[0]! / world;
  const ops = simulateComm({
    plan,
    hardware: hw,
    backend,
    commSms: backend === "sm" ? 16 : 0,
    computeDone: () => 0,
    ...(beside ? { computeUntil: plan.ranks.map(() => Infinity) } : {}),
  });
  const arrival = plan.ranks.map(() => new Array<number>(world).fill(0));
  const commEnd = plan.ranks.map(() => 0);
  for (const o of ops) {
    const op = plan.ranks[o.rank]!.streams[o.stream]![o.index]!;
    commEnd[o.rank] = Math.max(commEnd[o.rank]!, o.end);
    if (op.kind === "collective" || op.dst.tensor !== tensor) continue;
    const slab = Math.floor((op.dst.offsets[0] ?? 0) / slabRows);
    const row = arrival[o.dst]!;
    row[slab] = Math.max(row[slab]!, o.end);
  }
  return { arrival, commEnd };
}

/**
 * A rank's compute over chunks consumed in order: each chunk starts when the previous is
 * done and its slab has landed, and runs `(1 + slowdown)` slower while the rank's copies
 * are still moving (`until`). Returns its end (ms).
 */
export function chunkPipeline(
  startMs: number,
  chunks: readonly { readonly readyMs: number; readonly ms: number }[],
  slowdown: number,
  until: number,
): number {
  let t = startMs;
  for (const c of chunks) {
    t = Math.max(t, c.readyMs);
    t += t < until ? c.ms * (1 + slowdown) : c.ms;
  }
  return t;
}
