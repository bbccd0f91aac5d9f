// Options shared by the emitters, with the defaults measured best on H200 for the TMA GEMM
// (128×256×64 blocks, 8 warps, 3 stages: 4 stages exceed shared memory), and their checks.
import { checkIdentifier, EmitError } from "../writer/index.js";
import { checkLaunch, checkPositive } from "../kernels/common.js";
import type { ElementType } from "../device/index.js";

/** Options of `emitAgGemm` and `emitGemmRs`. */
export interface EmitOptions {
  /** Manifest name (an identifier; default from the operator). */
  readonly name?: string;
  /** Element type of A, B and C (default `bf16`; must match the plan tensor's). */
  readonly dtype?: ElementType;
  /** GEMM block sizes; default `BLOCK_K` is the schedule's `BK`, BLOCK_M/N must equal its `BM`/`BN`. */
  readonly blockK?: number;
  /** L2 grouping of the persistent GEMM (default the schedule's `groupSizeM`). */
  readonly groupM?: number;
  /** Warps of the GEMM kernel (default 8). */
  readonly numWarps?: number;
  /** Pipeline stages of the GEMM kernel (default 3; 4 exceed shared memory at 128×256×64). */
  readonly numStages?: number;
  /** Data movement of GEMM+RS: `copy-engine` (host ops, default) or `sm` (an `sm-push` kernel). */
  readonly backend?: "copy-engine" | "sm";
  /** Programs of the SM communication kernel (default 8). */
  readonly commSms?: number;
  /** Elements an SM communication program moves per step (default 2048). */
  readonly commBlock?: number;
  /** Warps of each SM communication program (default 4). */
  readonly commWarps?: number;
  /** `BLOCK_N` of `rs-reduce` (default 128). */
  readonly reduceBlockN?: number;
  /** Programs of the persistent `rs-reduce` (default: one per SM, see `rsReduceGrid`). */
  readonly reducePrograms?: number;
  /** Bound of every wait in ns (default 5 s). */
  readonly waitTimeoutNs?: number;
  /** Timing protocol (default 5 warm-up, 20 reps, 3 checked runs). */
  readonly timing?: { readonly warmup: number; readonly reps: number; readonly checkRuns: number };
  /** Relative Frobenius error allowed against the reference (default 2e-2). */
  readonly tolerance?: number;
}

/** Options with defaults filled in and checked. */
export interface ResolvedOptions {
  readonly dtype: ElementType;
  readonly numWarps: number;
  readonly numStages: number;
  readonly backend: "copy-engine" | "sm";
  readonly commSms: number;
  readonly commBlock: number;
  readonly commWarps: number;
  readonly reduceBlockN: number;
  readonly reducePrograms: number | undefined;
  readonly waitTimeoutNs: number;
  readonly timing: { warmup: number; reps: number; checkRuns: number };
  readonly tolerance: number;
}

/** Fill defaults and check every option. @throws {EmitError} `bad-param`. */
export function resolveOptions(o: EmitOptions): ResolvedOptions {
  if (o.name !== undefined) checkIdentifier(o.name, "manifest name");
  const dtype = o.dtype ?? "bf16";
  if (!["bf16", "fp16", "fp32"].includes(dtype)) throw new EmitError("bad-param", `dtype must be bf16, fp16 or fp32, got ${String(dtype)}`);
  const launch = checkLaunch({ numWarps: o.numWarps ?? 8, numStages: o.numStages ?? 3 });
  const backend = o.backend ?? "copy-engine";
  if (backend !== "copy-engine" && backend !== "sm") throw new EmitError("bad-param", `backend must be "copy-engine" or "sm", got ${String(backend)}`);
  const timing = o.timing ?? { warmup: 5, reps: 20, checkRuns: 3 };
  if (!Number.isSafeInteger(timing.warmup) || timing.warmup < 0) throw new EmitError("bad-param", "timing.warmup must be a non-negative integer");
  checkPositive(timing.reps, "timing.reps");
  checkPositive(timing.checkRuns, "timing.checkRuns");
  const tolerance = o.tolerance ?? 2e-2;
  if (!Number.isFinite(tolerance) || tolerance <= 0) throw new EmitError("bad-param", `tolerance must be a positive number, got ${tolerance}`);
  return {
    dtype,
    ...launch,
    backend,
    commSms: checkPositive(o.commSms ?? 8, "commSms"),
    commBlock: checkPositive(o.commBlock ?? 2048, "commBlock"),
    commWarps: checkLaunch({ numWarps: o.commWarps ?? 4, numStages: 1 }).numWarps,
    reduceBlockN: checkPositive(o.reduceBlockN ?? 128, "reduceBlockN"),
    reducePrograms: o.reducePrograms === undefined ? undefined : checkPositive(o.reducePrograms, "reducePrograms"),
    waitTimeoutNs: checkPositive(o.waitTimeoutNs ?? 5_000_000_000, "waitTimeoutNs"),
    timing: { ...timing },
    tolerance,
  };
}
