// Options shared by the emitters, with the launch defaults measured best on H200 for the
// TMA GEMM per tile (`gemmLaunchDefaults`), and their checks.
import { checkIdentifier, EmitError } from "./writer/index.js";
import { checkLaunch, checkPositive, type LaunchOptions } from "../backends/triton/kernels/common.js";
import { ELEMENT_BYTES, type ElementType } from "./device/index.js";
import { DEFAULT_TOLERANCE, outputDtype } from "./dtype.js";
import { TARGETS } from "@ovl/primitives";

/** Programs of the SM communication kernels when `EmitOptions.commSms` does not name them (what `ovl simulate` prices too). */
export const DEFAULT_COMM_SMS = 16;

/** How an operator's transfers are realised: host copies, SM stores through peer pointers, or NVSHMEM puts. */
export const TRANSFER_BACKENDS = ["copy-engine", "sm", "nvshmem"] as const;
export type TransferBackend = (typeof TRANSFER_BACKENDS)[number];

/**
 * The operators the `nvshmem` transfer backend realises (chunk pushes of AllGather+GEMM, partial-slab pushes of GEMM+RS,
 * and the partitioned GEMM+AllReduce's slab pushes and puts of the reduced slabs).
 */
export const NVSHMEM_OPERATORS = ["ag-gemm", "gemm-rs", "gemm-ar"] as const;

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
  /** Warps of the GEMM kernel (default per tile: `gemmLaunchDefaults`). */
  readonly numWarps?: number;
  /** Pipeline stages of the GEMM kernel (default per tile: `gemmLaunchDefaults`). */
  readonly numStages?: number;
  /**
   * How transfers are realised (the plan is the same): `copy-engine` (host ops, default), `sm` (an
   * `sm-push` kernel storing through peer pointers: GEMM+RS, GEMM+AR) or `nvshmem` (an `nvshmem-push`
   * kernel of NVSHMEM puts with signal, addressing peers by PE: AllGather+GEMM and GEMM+RS; for
   * multi-node runs, see the package README).
   */
  readonly backend?: TransferBackend;
  /**
   * Programs of the SM communication kernel (default {@link DEFAULT_COMM_SMS}). The SM defaults are measured: on four
   * H100s GEMM+RS's SM pushes at MLP-1/3 took 1.2–1.4 ms with 8 programs of 4 warps moving 2048
   * elements a step, 0.56 ms with 16 programs of 8 warps moving 8192 (each step's loads are all the
   * bytes a program has in flight; evidence: `results/runs/sm-push-h100x4-2026-11-27`).
   */
  readonly commSms?: number;
  /** Elements an SM communication program moves per step (default 8192). */
  readonly commBlock?: number;
  /** Warps of each SM communication program (default 8). */
  readonly commWarps?: number;
  /** `BLOCK_N` of `rs-reduce` (default: `rsReduceBlockN` of the GEMM's `BLOCK_M`: 128 for m-blocks of up to 128 rows, 64 for 256). */
  readonly reduceBlockN?: number;
  /** Programs of the persistent `rs-reduce` (default: one per SM, see `rsReduceGrid`). */
  readonly reducePrograms?: number;
  /** Bound of every wait in ns (default 5 s). */
  readonly waitTimeoutNs?: number;
  /** Timing protocol (default 5 warm-up, 20 reps, 3 checked runs). */
  readonly timing?: { readonly warmup: number; readonly reps: number; readonly checkRuns: number };
  /** Relative Frobenius error allowed against the reference (default per dtype: `DEFAULT_TOLERANCE`, 2e-2 for bf16, 5e-3 for fp16). */
  readonly tolerance?: number;
}

/** Options with defaults filled in and checked. */
export interface ResolvedOptions {
  readonly dtype: ElementType;
  /** Given warps and stages of the GEMM (`undefined`: the tile's defaults, `gemmLaunch`). */
  readonly numWarps: number | undefined;
  readonly numStages: number | undefined;
  readonly backend: TransferBackend;
  readonly commSms: number;
  readonly commBlock: number;
  readonly commWarps: number;
  /** Given `BLOCK_N` of the reduction (`undefined`: `rsReduceBlockN` of the m-block, once the tile is known). */
  readonly reduceBlockN: number | undefined;
  readonly reducePrograms: number | undefined;
  readonly waitTimeoutNs: number;
  readonly timing: { warmup: number; reps: number; checkRuns: number };
  readonly tolerance: number;
}

/** Fill defaults and check every option. @throws {EmitError} `bad-param`. */
export function resolveOptions(o: EmitOptions): ResolvedOptions {
  if (o.name !== undefined) checkIdentifier(o.name, "manifest name");
  const dtype = o.dtype ?? "bf16";
  if (!["bf16", "fp16", "fp32", "fp8e4m3"].includes(dtype))
    throw new EmitError("bad-param", `dtype must be bf16, fp16, fp32 or fp8e4m3, got ${String(dtype)}`);
  // Checked here, filled per tile by `gemmLaunch` once the tile is known.
  checkLaunch({ numWarps: o.numWarps ?? 8, numStages: o.numStages ?? 3 });
  const launch = { numWarps: o.numWarps, numStages: o.numStages };
  const backend = o.backend ?? "copy-engine";
  if (!TRANSFER_BACKENDS.includes(backend))
    throw new EmitError("bad-param", `backend must be one of ${TRANSFER_BACKENDS.map((b) => `"${b}"`).join(", ")}, got ${String(backend)}`);
  const timing = o.timing ?? { warmup: 5, reps: 20, checkRuns: 3 };
  if (!Number.isSafeInteger(timing.warmup) || timing.warmup < 0)
    throw new EmitError("bad-param", "timing.warmup must be a non-negative integer");
  checkPositive(timing.reps, "timing.reps");
  checkPositive(timing.checkRuns, "timing.checkRuns");
  const tolerance = o.tolerance ?? DEFAULT_TOLERANCE[dtype];
  if (!Number.isFinite(tolerance) || tolerance <= 0)
    throw new EmitError("bad-param", `tolerance must be a positive number, got ${tolerance}`);
  return {
    dtype,
    ...launch,
    backend,
    commSms: checkPositive(o.commSms ?? DEFAULT_COMM_SMS, "commSms"),
    commBlock: checkPositive(o.commBlock ?? 8192, "commBlock"),
    commWarps: checkLaunch({ numWarps: o.commWarps ?? 8, numStages: 1 }).numWarps,
    reduceBlockN: o.reduceBlockN === undefined ? undefined : checkPositive(o.reduceBlockN, "reduceBlockN"),
    reducePrograms: o.reducePrograms === undefined ? undefined : checkPositive(o.reducePrograms, "reducePrograms"),
    waitTimeoutNs: checkPositive(o.waitTimeoutNs ?? 5_000_000_000, "waitTimeoutNs"),
    timing: { ...timing },
    tolerance,
  };
}

/** Shared memory one block may use on Hopper (227 KiB), from the target table. */
export const HOPPER_SHARED_BYTES = TARGETS.h100.sharedBytesPerBlock;

/** Where a GEMM body's C tile goes: through shared memory (a TMA store), or straight from registers (pointer stores). */
export type GemmEpilogue = "shared" | "registers";

/**
 * Launch defaults of the persistent TMA GEMM for a tile: the deepest ring of 4, 3 or 2
 * stages whose A and B blocks, plus the epilogue's C tile where it passes through shared
 * memory, fit in `sharedBytes`, and 8 warps for tiles of 128×256 elements or more, else 4.
 * Measured on one H200 over six MLP problems (evidence: `results/runs/tiles-2026-11-22`):
 * 128×256×64 at 8 warps / 3 stages reaches 93% of cuBLAS on average; 128×128×64 reaches 90%
 * at 4 stages but 71–73% at 3. The MoE bodies store C from registers (rows scattered through
 * the routing), so 128×256×64 takes 4 stages there, the fastest of 3 and 4 at all of MoE-1…6
 * on one H100 (evidence: `results/runs/moe-bodies-h100-2026-11-26`).
 */
export function gemmLaunchDefaults(
  tile: { readonly BLOCK_M: number; readonly BLOCK_N: number; readonly BLOCK_K: number },
  dtype: ElementType = "bf16",
  sharedBytes = HOPPER_SHARED_BYTES,
  epilogue: GemmEpilogue = "shared",
): LaunchOptions {
  const bytes = ELEMENT_BYTES[dtype];
  const ring = (tile.BLOCK_M * tile.BLOCK_K + tile.BLOCK_K * tile.BLOCK_N) * bytes;
  // C is written in the output's type (bf16 for fp8 operands).
  const c = epilogue === "shared" ? tile.BLOCK_M * tile.BLOCK_N * ELEMENT_BYTES[outputDtype(dtype)] : 0;
  const numStages = [4, 3].find((s) => s * ring + c <= sharedBytes) ?? 2;
  return { numWarps: tile.BLOCK_M * tile.BLOCK_N >= 128 * 256 ? 8 : 4, numStages };
}

/** The GEMM's warps and stages: the options' where given, else the tile's defaults. */
export function gemmLaunch(
  o: ResolvedOptions,
  tile: { readonly BLOCK_M: number; readonly BLOCK_N: number; readonly BLOCK_K: number },
  epilogue: GemmEpilogue = "shared",
): LaunchOptions {
  const d = gemmLaunchDefaults(tile, o.dtype, HOPPER_SHARED_BYTES, epilogue);
  return { numWarps: o.numWarps ?? d.numWarps, numStages: o.numStages ?? d.numStages };
}
