// Per-rank memory of a candidate, to prune what cannot run before anything is priced: the
// buffers the emitted operator allocates (global memory) and the GEMM's pipelined operand
// tiles (shared memory per block).
import { TARGETS } from "@ovl/primitives";
import type { Candidate, TuneProblem } from "./space.js";

/** What a GPU offers: global memory per rank and shared memory per thread block, in bytes. */
export interface MemoryLimits {
  readonly globalBytes: number;
  readonly sharedBytesPerBlock: number;
}

/** Hopper (H100 / H200): 227 KiB of shared memory per block; global memory per GPU. */
export const HOPPER_SHARED_BYTES = TARGETS.h100.sharedBytesPerBlock;

/** Global memory of the built-in hardware models (bytes): H100 SXM 80 GB, H200 SXM 141 GB. */
export const DEVICE_MEMORY_BYTES: Readonly<Record<string, number>> = {
  H100_SXM: TARGETS.h100.memoryBytes,
  H200_SXM: TARGETS.h200.memoryBytes,
};

/** A candidate's per-rank memory. */
export interface CandidateMemory {
  /** Buffers of the operator on one rank (inputs, outputs, staging, signal slots). */
  readonly globalBytes: number;
  /** Shared memory of one GEMM block: `stages × (BM·BK + BK·BN)` elements (0 for the library GEMM). */
  readonly sharedBytes: number;
}

const ELEMENT_BYTES = { bf16: 2, fp16: 2, fp32: 4 } as const;
/** Pipeline stages of the emitted TMA GEMM (3: four exceed shared memory at 128×256×64). */
export const GEMM_STAGES = 3;

/**
 * Per-rank bytes of `candidate`, following the buffers the emitters allocate.
 * AG+GEMM: the gathered `A[M×K]`, `B[K×N]`, `C[M×N]`. GEMM+RS: `A[M×K]`, `B[K×N]`,
 * `C_partial[M×N]`, the receive slabs `[W × M/W × N]` (overlapped only: the collective
 * reduces in place otherwise) and the output `[M/W × N]`; GEMM+AR the same with the whole
 * output `[M × N]`. Signal slots: one 4-byte slot
 * per chunk per peer, plus one per m-block for tile-done signals.
 */
export function candidateMemory(problem: TuneProblem, candidate: Candidate): CandidateMemory {
  const e = ELEMENT_BYTES[problem.dtype];
  const { M, N, K, world } = problem;
  const rows = Math.ceil(M / world);
  // GEMM+AR's output is all of C on every rank; GEMM+RS's one slab.
  const out = problem.operator === "gemm-ar" ? M * N : rows * N;
  const base = problem.operator === "ag-gemm" ? (M * K + K * N + M * N) * e : (M * K + K * N + M * N + out) * e;
  if (candidate.path === "sequential") return { globalBytes: base, sharedBytes: 0 };
  const slabs = problem.operator !== "ag-gemm" ? world * rows * N * e : 0;
  const slots = 4 * (world * candidate.split + Math.ceil(M / candidate.tile.BM));
  const { BM, BN, BK } = candidate.tile;
  return { globalBytes: base + slabs + slots, sharedBytes: GEMM_STAGES * (BM * BK + BK * BN) * e };
}

/** Why `candidate` does not fit `limits`, or `undefined` when it fits. */
export function memoryMisfit(problem: TuneProblem, candidate: Candidate, limits: MemoryLimits): string | undefined {
  const m = candidateMemory(problem, candidate);
  if (m.globalBytes > limits.globalBytes) {
    return `needs ${(m.globalBytes / 1e9).toFixed(2)} GB per rank, the device has ${(limits.globalBytes / 1e9).toFixed(2)} GB`;
  }
  if (m.sharedBytes > limits.sharedBytesPerBlock) {
    return `its GEMM tile needs ${Math.round(m.sharedBytes / 1024)} KiB of shared memory per block, the device has ${Math.round(limits.sharedBytesPerBlock / 1024)} KiB`;
  }
  return undefined;
}
