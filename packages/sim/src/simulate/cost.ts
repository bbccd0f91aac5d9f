// The closed-form cost model under the simulator: per-tile GEMM time, copy-engine and SM
// transfer times, signal costs, NCCL-like collectives. All times in milliseconds.
import type { CollectiveKind } from "@ovl/chunk-plan";
import type { HardwareModel } from "./hardware.js";
import { SimulateError } from "./errors.js";

/** A GEMM problem: C[M×N] = A[M×K] · B[K×N]. */
export interface GemmProblem {
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

const US = 1e-3;

/**
 * Time of one output tile `BM × BN` over the full K on one SM (ms): `2·BM·BN·K` flops at the
 * model's sustained per-SM rate, scaled by `efficiency` (1 = cuBLAS-class kernel).
 */
export function tileMs(hw: HardwareModel, tile: { BM: number; BN: number }, K: number, efficiency = 1): number {
  return ((2 * tile.BM * tile.BN * K) / (hw.gemm.tflopsPerSm * 1e12 * efficiency)) * 1e3;
}

/**
 * A whole GEMM alone on `sms` SMs (default all): launch cost plus wave-quantised rounds of
 * the model's fitted tile. A partial last wave costs a full round, which is where small
 * problems lose efficiency (the measured GEMM-vs-rows curve).
 */
export function gemmMs(hw: HardwareModel, problem: GemmProblem, opts: { sms?: number; efficiency?: number } = {}): number {
  checkProblem(problem);
  const { BM, BN } = hw.gemm.tile;
  const tiles = Math.ceil(problem.M / BM) * Math.ceil(problem.N / BN);
  const sms = opts.sms ?? hw.smCount;
  return hw.gemm.launchUs * US + Math.ceil(tiles / sms) * tileMs(hw, hw.gemm.tile, problem.K, opts.efficiency);
}

/** Start-up cost of one copy-engine transfer at this world size (ms). */
export function copyLaunchMs(hw: HardwareModel, world: number): number {
  return (hw.copyEngine.launchUs + hw.copyEngine.launchPerRankUs * world) * US;
}

/** A host-issued stream write of a signal after a copy (ms). */
export function streamWriteMs(hw: HardwareModel, world: number): number {
  return (hw.signal.streamWriteUs + hw.signal.streamWritePerRankUs * world) * US;
}

/** One copy-engine transfer alone on an idle link: launch + bytes at the engine's bandwidth (ms). */
export function copyEngineMs(hw: HardwareModel, bytes: number, world: number): number {
  return copyLaunchMs(hw, world) + (bytes / (hw.copyEngine.bandwidthGBps * 1e9)) * 1e3;
}

/** Per-direction NVLink bandwidth of one GPU (GB/s): the cap its concurrent transfers share. */
export function portGBps(hw: HardwareModel): number {
  return hw.nvlink.links * hw.nvlink.linkGBps;
}

/**
 * An NCCL-like collective over `n` ranks on a tensor of `bytes` (the gathered output of an
 * all-gather, the input of a reduce-scatter, the buffer of an all-reduce / all-to-all):
 * `latency + traffic / busGBps`, traffic `(n-1)/n · bytes` (twice that for all-reduce).
 */
export function collectiveMs(hw: HardwareModel, kind: CollectiveKind, bytes: number, n: number): number {
  if (n <= 1) return 0;
  const traffic = ((n - 1) / n) * bytes * (kind === "all-reduce" ? 2 : 1);
  return hw.collective.latencyUs * US + (traffic / (hw.collective.busGBps * 1e9)) * 1e3;
}

/** An HBM-bound pass reading `readBytes` and writing `writeBytes` (ms), e.g. a local copy or a reduction. */
export function hbmPassMs(hw: HardwareModel, readBytes: number, writeBytes: number): number {
  return ((readBytes + writeBytes) / (hw.hbmGBps * 1e9)) * 1e3;
}

/**
 * Bandwidth of the reduction kernel (`rs-reduce`) on a persistent grid of `programs` (GB/s):
 * `peakGBps · programs / (programs + halfPrograms)` (default grid: the model's), or HBM
 * bandwidth when the model has no `reduceKernel` calibration.
 */
export function reduceKernelGBps(hw: HardwareModel, programs?: number): number {
  const rk = hw.reduceKernel;
  if (rk === undefined) return hw.hbmGBps;
  const p = programs ?? rk.programs;
  return (rk.peakGBps * p) / (p + rk.halfPrograms);
}

/**
 * One reduction pass alone over `bytes` read plus written (ms): the kernel's fixed cost
 * (`reduceKernel.launchUs`, else a GEMM launch) plus the bytes at {@link reduceKernelGBps}.
 */
export function reducePassMs(hw: HardwareModel, bytes: number, programs?: number): number {
  return (hw.reduceKernel?.launchUs ?? hw.gemm.launchUs) * US + (bytes / (reduceKernelGBps(hw, programs) * 1e9)) * 1e3;
}

function checkProblem(p: GemmProblem): void {
  for (const [k, v] of Object.entries(p)) {
    if (!Number.isInteger(v) || v <= 0) {
      throw new SimulateError("bad-problem", `problem.${k} = ${String(v)}: M, N and K must be positive integers`);
    }
  }
}

/**
 * Bytes per µs one SM stores from its registers (epilogues, a stream-K piece's fp32 partial)
 * and reads partials back at: the compute model's epilogue rate (`tune/compute.ts`).
 */
export const SM_STORE_BYTES_PER_US = 120e3;

/**
 * A stream-K body's cut of its last, partial wave (`kernels/gemm_tma_persistent_streamk.py`):
 * `tail` tiles over `programs`, each cut into `split` pieces along K — at most 4, one program
 * per piece, 512 of K each at least; `split` < 2 means the tail runs as whole tiles.
 */
export function streamKSplit(tiles: number, programs: number, K: number): { readonly tail: number; readonly split: number } {
  const tail = tiles % programs;
  const split = tail > 0 ? Math.min(Math.floor(programs / tail), 4, Math.floor(K / 512)) : 0;
  return split >= 2 ? { tail, split } : { tail: 0, split: 1 };
}

/**
 * What SM copy kernels on `sms` SMs move out of one GPU (GB/s): `sms · bandwidthPerSmGBps`, saturating
 * at `peakGBps` where the model has one (`b · n · peak / (b · n + peak)`).
 */
export function smCopyGBps(hw: HardwareModel, sms: number): number {
  const linear = sms * hw.smCopy.bandwidthPerSmGBps;
  const peak = hw.smCopy.peakGBps;
  return peak === undefined ? linear : (linear * peak) / (linear + peak);
}
