// How many SMs the SM deliveries of GEMM+ReduceScatter (and partitioned GEMM+AllReduce) get: enough
// push programs to move a rank's partial rows of its peers' slabs while its GEMM runs, and no more,
// since every push SM is one the GEMM producer leaves free.
import { gemmMs, smCopyGBps } from "../simulate/cost.js";
import type { HardwareModel } from "../simulate/hardware.js";
import { TuneError } from "./errors.js";

/** The push-program counts chosen between (the emitter's default, 16, is the largest). */
export const COMM_SMS_CANDIDATES = [4, 8, 16] as const;

/**
 * The GEMM producer's time beside SM pushes over its time alone: 0.439 / 0.320 ms and, beside the copy
 * engine's deliveries, 0.431 / 0.318 ms (MLP-1, world 4, four H100s)
 * (evidence: `results/runs/sm-push-h100x4-2026-11-27`). The pushes have that long.
 */
export const GEMM_BESIDE_COMM = 1.36;

/** A GEMM+RS problem: the per-rank GEMM `M × N × K` (`M` all ranks' rows) at `world` ranks. */
export interface CommSmsProblem {
  readonly M: number;
  readonly N: number;
  readonly K: number;
  readonly world: number;
  /** Bytes per element of the partial sums (bf16: 2). */
  readonly elementBytes: number;
}

/** {@link chooseCommSms}'s answer and why. */
export interface CommSmsChoice {
  readonly commSms: number;
  /** Bytes a rank pushes: its partial rows of every peer's slab. */
  readonly bytes: number;
  /** The GEMM beside the pushes (ms): the model's GEMM alone × {@link GEMM_BESIDE_COMM}. */
  readonly windowMs: number;
  /** SMs that move `bytes` within `windowMs`, each at the per-SM rate of the most candidate SMs (`smCopyGBps`). */
  readonly neededSms: number;
}

/**
 * The fewest push programs of {@link COMM_SMS_CANDIDATES} that move a rank's `(W-1)/W · M · N` partial
 * elements within its GEMM's time beside them, else the most. Measured on four H100s (GEMM+RS over SM
 * pushes, 4 / 8 / 16 programs launched in turn) (evidence: `results/runs/comm-sms-h100x4-2026-11-27`): at world 4, MLP-1/3 want
 * 16 and MLP-4…6 4 to 8; at world 2 every MLP shape wants 4 (2–10% faster than 16).
 * @throws {TuneError} `bad-problem` on a non-positive size or world.
 */
export function chooseCommSms(hw: HardwareModel, p: CommSmsProblem): CommSmsChoice {
  for (const [k, v] of Object.entries(p)) {
    if (!Number.isInteger(v) || v <= 0) throw new TuneError("bad-problem", `${k} must be a positive integer, got ${v}`);
  }
  const bytes = ((p.world - 1) / p.world) * p.M * p.N * p.elementBytes;
  const windowMs = gemmMs(hw, { M: p.M, N: p.N, K: p.K }) * GEMM_BESIDE_COMM;
  // Priced per SM at the rate of the most candidate SMs: a conservative count where fewer SMs each move
  // more (smCopyGBps saturates), the rule the four-H100 runs validated.
  const most = COMM_SMS_CANDIDATES[COMM_SMS_CANDIDATES.length - 1]!;
  const neededSms = bytes / (windowMs * 1e-3) / ((smCopyGBps(hw, most) / most) * 1e9);
  const commSms = COMM_SMS_CANDIDATES.find((c) => c >= neededSms) ?? COMM_SMS_CANDIDATES[COMM_SMS_CANDIDATES.length - 1]!;
  return { commSms, bytes, windowMs, neededSms };
}
