// The GEMM operators at one fixed, emitted configuration, priced by the discrete-event
// simulator: AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce (partitioned and
// tile-wise), and AllToAll+GEMM (the AG+GEMM consumer over an all-to-all plan).
import { allToAll, lowerToTileSchedule, planSignals } from "@ovl/chunk-plan";
import type { HardwareModel } from "../simulate/hardware.js";
import { resolveHardware } from "../simulate/registry.js";
import { simulate } from "../simulate/simulate.js";
import { SimulateError } from "../simulate/errors.js";
import { candidatePlan, candidateSchedule } from "../tune/build.js";
import type { OverlappedCandidate } from "../tune/space.js";
import { type OperatorPrediction, operatorPrediction } from "./prediction.js";

/** The GEMM operators this module prices. */
export const GEMM_OPERATORS = ["ag-gemm", "gemm-rs", "gemm-ar", "gemm-ar-tilewise", "a2a-gemm"] as const;
/** One of {@link GEMM_OPERATORS}. */
export type GemmOperator = (typeof GEMM_OPERATORS)[number];

/** A per-rank GEMM `A[M×K]·B[K×N]` of an operator over `world` ranks, bf16. */
export interface GemmOperatorProblem {
  readonly operator: GemmOperator;
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly world: number;
}

/**
 * The configuration priced: the emitted Triton GEMM at 128×256×64, GROUP_M 8, one chunk
 * per shard; copy-engine transfers, except the tile-wise AllReduce (16 communication SMs,
 * its reduction beside the GEMM, one flag per m-block).
 */
export const GEMM_OPERATOR_CONFIG = { tile: { BM: 128, BN: 256, BK: 64 }, groupSizeM: 8, split: 1, commSms: 16 } as const;

/** Predict one GEMM operator with {@link simulate} at {@link GEMM_OPERATOR_CONFIG}. */
export function predictGemmOperator(
  problem: GemmOperatorProblem,
  options: { readonly hardware: HardwareModel | string },
): OperatorPrediction {
  const hw = resolveHardware(options.hardware);
  const { operator, M, N, K, world } = problem;
  for (const [k, v] of Object.entries({ M, N, K, world })) {
    if (!Number.isInteger(v) || v <= 0) throw new SimulateError("bad-problem", `${operator} ${k} = ${v}: give a positive integer`);
  }
  const { tile, groupSizeM, commSms } = GEMM_OPERATOR_CONFIG;
  const rows = M / world;
  if (!Number.isInteger(rows) || rows % tile.BM !== 0) {
    throw new SimulateError("bad-problem", `${operator}: M / world = ${rows} rows must be a multiple of ${tile.BM}`);
  }
  const kernel = hw.tritonGemm !== undefined ? { computeKernel: { kind: "triton" as const } } : {};
  if (operator === "a2a-gemm") {
    const plan = planSignals(allToAll({ tensor: { name: "A", shape: [M, K], dtype: "bf16" }, axis: 0, mesh: [world], split: 1 }));
    const schedule = lowerToTileSchedule(
      plan,
      { tensor: "A", problem: { M, N, K }, tile: { ...tile }, groupSizeM, persistent: { numSms: hw.smCount } },
      { role: "consumer" },
    );
    const sim = simulate(plan, schedule, { hardware: hw, ...kernel });
    return operatorPrediction(operator, hw.name, world, sim.latencyMs, sim.computeAloneMs, sim.commAloneMs);
  }
  const tilewise = operator === "gemm-ar-tilewise";
  const base = tilewise ? "gemm-ar" : operator;
  const candidate: OverlappedCandidate = {
    path: "overlapped",
    split: tilewise ? rows / tile.BM : 1,
    backend: tilewise ? "sm" : "copy-engine",
    commSms: tilewise ? commSms : 0,
    tile: { ...tile },
    groupSizeM,
    ...(base === "gemm-ar" ? { allReduce: tilewise ? ("tilewise" as const) : ("partitioned" as const) } : {}),
  };
  const tp = { operator: base, M, N, K, world, dtype: "bf16" as const };
  const plan = candidatePlan(tp, candidate.split);
  const schedule = candidateSchedule(tp, plan, candidate, hw.smCount - candidate.commSms);
  const sim = simulate(plan, schedule, {
    hardware: hw,
    backend: candidate.backend,
    commSms: candidate.commSms,
    ...kernel,
    ...(tilewise ? { reduceKernel: { programs: commSms, concurrent: true } } : {}),
  });
  return operatorPrediction(operator, hw.name, world, sim.latencyMs, sim.computeAloneMs, sim.commAloneMs);
}
